// The pipelined client behind the counter checks (lib/harness/pipelined.js):
// two requests written at once on one connection reach the server's handler
// together, so one process certainly holds both; the responses come back in
// order, whether delimited by content-length, chunks or the connection's end;
// and a request that never gets its answer counts as hung.
import net from 'node:net';
import express from 'express';
import { pipelined, parseResponses } from '../lib/harness/pipelined.js';

async function listen(app) {
  const server = app.listen(0);
  await new Promise((resolve) => server.once('listening', resolve));
  return { server, port: server.address().port };
}

test('two pipelined requests are in an express handler at the same time, and both answers come back in order', async () => {
  let inFlight = 0;
  let most = 0;
  let n = 0;
  const app = express();
  // Answers only on a later turn of the event loop, as a worker that asks its
  // primary does: both requests must already be in the handler by then.
  app.post('/count', (req, res) => {
    inFlight += 1;
    most = Math.max(most, inFlight);
    const mine = ++n;
    setImmediate(() => {
      inFlight -= 1;
      res.json({ pid: process.pid, count: mine });
    });
  });
  const { server, port } = await listen(app);
  try {
    const results = await pipelined(port, '/count', { method: 'POST', count: 2, timeoutMs: 5000 });
    expect(most).toBe(2);
    expect(results.map((r) => [r.ok, r.status, r.json?.count, r.pid])).toEqual([
      [true, 200, 1, process.pid],
      [true, 200, 2, process.pid],
    ]);
    expect(results.map((r) => r.pipelined)).toEqual([{ index: 1, of: 2 }, { index: 2, of: 2 }]);
  } finally {
    server.close();
  }
});

test('a pipelined pair whose first answer never comes hangs, both of them', async () => {
  const sockets = [];
  // Reads the requests and never answers.
  const server = net.createServer((socket) => sockets.push(socket));
  await new Promise((resolve) => server.listen(0, resolve));
  try {
    const results = await pipelined(server.address().port, '/count', { method: 'POST', count: 2, timeoutMs: 300 });
    expect(results.map((r) => [r.ok, r.code])).toEqual([
      [false, 'TIMEOUT'],
      [false, 'TIMEOUT'],
    ]);
  } finally {
    sockets.forEach((s) => s.destroy());
    server.close();
  }
});

test('responses are split by content-length, by chunks, and the last by the end of the connection', () => {
  const raw = Buffer.from(
    'HTTP/1.1 200 OK\r\ncontent-length: 9\r\n\r\n{"pid":1}' +
      'HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n4\r\n{"pi\r\n5\r\nd":2}\r\n0\r\n\r\n' +
      'HTTP/1.1 500 Oops\r\nconnection: close\r\n\r\nboom',
  );
  expect(parseResponses(raw).responses.map((r) => [r.status, r.text])).toEqual([
    [200, '{"pid":1}'],
    [200, '{"pid":2}'],
  ]);
  expect(parseResponses(raw, { ended: true }).responses.map((r) => [r.status, r.text])).toEqual([
    [200, '{"pid":1}'],
    [200, '{"pid":2}'],
    [500, 'boom'],
  ]);
  // A response cut short is not a response yet.
  expect(parseResponses(raw.subarray(0, 40)).responses).toHaveLength(0);
});
