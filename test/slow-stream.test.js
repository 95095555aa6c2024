// The slow stream (verify/shared/slow-stream.js) is how rolling-restart gives
// every worker it retires slow requests in flight with over 1 s to run. That
// holds only if the requests go out at a steady pace, each on a connection
// of its own (a kept connection would hand a retired worker one more slow
// request), and the stream stops when told: the last retiree must drain only
// what the other clients leave it.
import http from 'node:http';
import { spawnSync } from 'node:child_process';
import { startSlowStream, slowRequestsNeed, cutInFlight } from '../verify/shared/slow-stream.js';

async function serve(handler) {
  const arrivals = [];
  const sockets = new Set();
  const server = http.createServer((req, res) => {
    arrivals.push({ at: performance.now(), socket: req.socket, connection: req.headers.connection });
    handler(req, res);
  });
  server.on('connection', (s) => sockets.add(s));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  return { server, arrivals, sockets, port: server.address().port };
}

const slowHandler = (req, res) => setTimeout(() => res.end(JSON.stringify({ pid: 1 })), 600);

test('one request every interval, each on a new connection that says Connection: close, until until() is true', async () => {
  const { server, arrivals, sockets, port } = await serve(slowHandler);
  const aborter = new AbortController();
  const ctx = { port, signal: aborter.signal, program: { host: '127.0.0.1' } };
  let stopSending = false;
  const t0 = performance.now();
  const stream = startSlowStream(ctx, { path: '/slow?ms=600', intervalMs: 40, timeoutMs: 3000, until: () => stopSending });
  await new Promise((resolve) => setTimeout(resolve, 600));
  stopSending = true;
  const stoppedAt = performance.now();
  const results = await stream.stop();
  await new Promise((resolve) => server.close(resolve));
  // About 15 in 600 ms; a loaded machine may send fewer, never many more.
  expect(results.length).toBeGreaterThanOrEqual(8);
  expect(results.length).toBeLessThanOrEqual(17);
  expect(results.every((r) => r.ok && r.status === 200 && r.end - r.start >= 590)).toBe(true);
  expect(sockets.size).toBe(results.length);
  expect(arrivals.every((a) => a.connection === 'close')).toBe(true);
  // Nothing sent after it was told to stop (one interval of slack).
  expect(Math.max(...results.map((r) => r.start))).toBeLessThan(stoppedAt + 5);
  expect(stream.stoppedAt()).toBeGreaterThan(t0);
});

test('stop() waits for the requests in flight and reports a cut one as failed', async () => {
  let n = 0;
  const { server, port } = await serve((req, res) => {
    n += 1;
    // The third request is cut in flight, as a drain that ends too early does.
    if (n === 3) setTimeout(() => req.socket.destroy(), 100);
    else setTimeout(() => res.end('{}'), 200);
  });
  const aborter = new AbortController();
  const ctx = { port, signal: aborter.signal, program: { host: '127.0.0.1' } };
  const stream = startSlowStream(ctx, { path: '/slow?ms=200', intervalMs: 50, timeoutMs: 3000, until: () => false });
  await new Promise((resolve) => setTimeout(resolve, 250));
  const results = await stream.stop();
  await new Promise((resolve) => server.close(resolve));
  // Every request sent was waited for, the slow ones too.
  expect(results.length).toBe(n);
  expect(results.filter((r) => r.ok)).toHaveLength(n - 1);
  expect(results.filter((r) => !r.ok)[0].code).toMatch(/ECONNRESET|EPIPE/);
});

test('about 15 requests at once print no MaxListenersExceededWarning (the verifier\'s stderr reaches the learner)', () => {
  // A process of its own: jest's sandbox does not see the process's warnings.
  const script = `
    import http from 'node:http';
    import { startSlowStream } from './verify/shared/slow-stream.js';
    const server = http.createServer((req, res) => setTimeout(() => res.end('{}'), 600));
    server.listen(0, '127.0.0.1', async () => {
      const ctx = { port: server.address().port, signal: new AbortController().signal, program: { host: '127.0.0.1' } };
      const stream = startSlowStream(ctx, { path: '/', intervalMs: 40, timeoutMs: 3000, until: () => false });
      setTimeout(async () => {
        const results = await stream.stop();
        console.log(results.length);
        server.close();
      }, 700);
    });`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: new URL('..', import.meta.url).pathname, encoding: 'utf8', timeout: 20000 });
  expect(Number(r.stdout.trim())).toBeGreaterThan(11);
  expect(r.stderr).not.toMatch(/MaxListenersExceededWarning/);
});

describe('slowRequestsNeed: what the slow requests an old worker held still needed when it stopped accepting', () => {
  const answer = (pid, start, end, ok = true) => ({ pid, start, end, ok });

  test('adds up, per retired worker, its last slow answer after it stopped accepting', () => {
    const stopped = new Map([
      [10, 1000],
      [11, 3000],
    ]);
    const answers = [answer(10, 200, 1500), answer(10, 900, 1800), answer(11, 2500, 4000), answer(11, 2000, 3100)];
    expect(slowRequestsNeed(stopped, answers)).toBe(800 + 1000);
  });

  test('nothing for answers done before the stop, for cut requests, or for other workers', () => {
    const stopped = new Map([[10, 1000]]);
    const answers = [answer(10, 100, 900), answer(10, 950, 2400, false), answer(12, 950, 2400)];
    expect(slowRequestsNeed(stopped, answers)).toBe(0);
  });
});

describe('cutInFlight: which slow requests a drain cut, and which the check of failed requests judges', () => {
  const r = (start, end, extra) => ({ start, end, ...extra });
  test('a reset after the request ran a while, and an answer other than 200, are cuts', () => {
    const reset = r(0, 1400, { ok: false, code: 'ECONNRESET' });
    const status = r(0, 1500, { ok: true, status: 503 });
    expect(cutInFlight([reset, status, r(0, 1500, { ok: true, status: 200 })])).toEqual([reset, status]);
  });
  test('a refusal, no answer at all, a reset within 500 ms of the send and an abandoned request are not', () => {
    const results = [
      r(0, 5, { ok: false, code: 'ECONNREFUSED' }),
      r(0, 8000, { ok: false, code: 'TIMEOUT' }),
      r(0, 238, { ok: false, code: 'ECONNRESET' }),
      r(0, 900, { ok: false, code: 'ECONNRESET', abandoned: true }),
    ];
    expect(cutInFlight(results)).toEqual([]);
  });
});
