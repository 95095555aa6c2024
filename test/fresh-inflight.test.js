// A request in flight at a signal must still be unfinished when the signal
// comes. A verifier short of CPU sees the request read late (its poll runs
// late): startFreshKeepAliveInFlight then sends it again, so that what it
// returns was started at most freshMs ago. Here the verifier's first poll is
// made 2500 ms late on purpose, for a request that takes 3000 ms.
import http from 'node:http';
import { once } from 'node:events';
import { startKeepAliveInFlight } from '../verify/shared/inflight.js';
import { startFreshKeepAliveInFlight } from '../verify/shared/fresh-inflight.js';
import { pollUntil, sleepFor } from '../lib/harness/wait.js';

const SLOW_MS = 3000;
const FRESH_MS = (SLOW_MS * 3) / 4;
const STARVED_MS = 2500;
let server;
let port;
beforeAll(async () => {
  server = http.createServer((req, res) => {
    const ms = Number(new URL(req.url, 'http://x').searchParams.get('ms') ?? 0);
    setTimeout(() => res.end(JSON.stringify({ pid: process.pid })), ms);
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  port = server.address().port;
});
afterAll(() => {
  server.closeAllConnections();
  server.close();
});

/** A step context whose first `late` polls start STARVED_MS late, as on a starved machine. */
function starvedContext({ late }) {
  const logs = [];
  let polls = 0;
  const controller = new AbortController();
  return {
    port,
    signal: controller.signal,
    logs,
    log: (line) => logs.push(line),
    async poll(fn, o) {
      if (polls++ < late) await sleepFor(STARVED_MS);
      return pollUntil(fn, { ...o, signal: controller.signal });
    },
  };
}

const ageOf = async (ctx, started, sentBefore) => {
  const age = performance.now() - sentBefore;
  await started.stop();
  return age;
};

test('without it, a request seen read late is returned almost done: a signal sent now would find it answered', async () => {
  const ctx = starvedContext({ late: 1 });
  const before = performance.now();
  const started = await startKeepAliveInFlight(ctx, `/slow?ms=${SLOW_MS}`, { timeoutMs: 5000, then: '/' });
  expect(await ageOf(ctx, started, before)).toBeGreaterThan(FRESH_MS);
});

test('a request seen read late is sent again on a new connection: the one returned was started at most freshMs ago', async () => {
  const ctx = starvedContext({ late: 1 });
  let before = performance.now();
  const log = ctx.log;
  ctx.log = (line) => {
    log(line);
    before = performance.now(); // the next attempt starts after this line
  };
  const started = await startFreshKeepAliveInFlight(ctx, `/slow?ms=${SLOW_MS}`, { timeoutMs: 5000, then: '/', freshMs: FRESH_MS });
  expect(await ageOf(ctx, started, before)).toBeLessThanOrEqual(FRESH_MS);
  expect(ctx.logs).toEqual([expect.stringMatching(/^\/slow\?ms=3000 was seen read \d+ ms after it was sent \(the verifier was short of CPU\): sent again on a new connection/)]);
});

test('a request seen read in time is returned as it is, on its first connection', async () => {
  const ctx = starvedContext({ late: 0 });
  const before = performance.now();
  const started = await startFreshKeepAliveInFlight(ctx, `/slow?ms=${SLOW_MS}`, { timeoutMs: 5000, then: '/', freshMs: FRESH_MS });
  expect(await ageOf(ctx, started, before)).toBeLessThanOrEqual(FRESH_MS);
  expect(ctx.logs).toEqual([]);
});
