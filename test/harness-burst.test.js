// The burst behind the counter checks (verify/shared/counter.js): a gated
// request opens its connection at once but sends nothing until the gate
// opens, and connectionsHeld() sees the connections a cluster's primary has
// handed to its workers, so that all requests can reach the workers at the
// same moment, whatever the machine's load.
import http from 'node:http';
import { join } from 'node:path';
import { request } from '../lib/harness/http.js';
import { connectionsHeld } from '../lib/harness/sockets.js';
import { freePort } from '../lib/harness/ports.js';
import { LearnerProgram } from '../lib/harness/program.js';
import { until } from './helpers/until.js';

const SILENT_CLUSTER = join(new URL('./fixtures/harness/', import.meta.url).pathname, 'silent-cluster.js');

function gatedBurst(port, n) {
  let open;
  const gate = new Promise((resolve) => (open = resolve));
  const burst = { connected: 0, open };
  burst.results = Promise.all(
    Array.from({ length: n }, () => request(port, '/', { gate, onConnected: () => (burst.connected += 1), timeoutMs: 10000 })),
  );
  return burst;
}

test('a gated request connects at once and sends only when the gate opens', async () => {
  let connections = 0;
  let requests = 0;
  const server = http.createServer((req, res) => {
    requests += 1;
    res.end(JSON.stringify({ pid: process.pid }));
  });
  server.on('connection', () => (connections += 1));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const burst = gatedBurst(server.address().port, 5);
    await until(() => burst.connected === 5 && connections === 5, 'all 5 connections are up');
    // A request written before the gate would have been parsed by now: the
    // server has already seen its connection, in the same event loop.
    await new Promise((r) => setImmediate(r));
    expect(requests).toBe(0);
    burst.open();
    const results = await burst.results;
    expect(results.map((r) => r.pid)).toEqual(Array(5).fill(process.pid));
    expect(requests).toBe(5);
  } finally {
    server.close();
  }
});

test("connectionsHeld counts the connections the primary has handed to its workers", async () => {
  const port = await freePort();
  const program = new LearnerProgram({ file: SILENT_CLUSTER, port, env: { WORKERS: '2' } }).start();
  try {
    // Ready: both workers answer.
    await until(() => program.workers().length === 2, 'two workers run');
    const seen = new Set();
    while (seen.size < 2) {
      const r = await request(port, '/');
      if (r.pid !== undefined) seen.add(r.pid);
    }
    expect(connectionsHeld(port, program.workers())).toBe(0);
    const burst = gatedBurst(port, 20);
    await until(() => connectionsHeld(port, program.workers()) === 20, 'the workers hold all 20 connections');
    // The kernel completes a connection before this process runs its
    // 'connect' callback: on a loaded machine the workers held all 20 while
    // the count here was still 0. Wait for the callbacks too.
    await until(() => burst.connected === 20, 'the burst saw all 20 connect');
    burst.open();
    const results = await burst.results;
    expect(new Set(results.map((r) => r.pid))).toEqual(seen);
    await until(() => connectionsHeld(port, program.workers()) === 0, 'the connections are closed');
  } finally {
    await program.stop();
  }
});
