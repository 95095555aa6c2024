// A request that is really in flight: sent, and read by a worker, before the
// verifier signals. Signalling a moment too early would blame the learner for
// a connection the worker had not read yet (http's server.close() drops
// connections that carry no request so far).
//
// On Linux the kernel shows it: the request goes out from a local address of
// its own (127.0.0.9), and once the server-side socket of that connection has
// an empty receive queue, a worker has read the request. Elsewhere (no /proc,
// no 127.0.0.9) a short margin after the send stands in.
import { readFileSync } from 'node:fs';
import { request } from '../../lib/harness/http.js';
import { keepAliveSequence } from '../../lib/harness/keepalive.js';
import { sleepFor } from '../../lib/harness/context.js';

const ON_LINUX = process.platform === 'linux';
const LOCAL_ADDRESS = '127.0.0.9';
const LOCAL_HEX = '0900007F'; // 127.0.0.9 as /proc/net/tcp prints it (little-endian)
const FALLBACK_MARGIN_MS = 300;

/**
 * Starts `path` and resolves once a worker has read it.
 * @returns {Promise<{ result: Promise<object>, sentAt: number, readMs: number|null }>}
 *   result: the request's outcome (never rejects); readMs: when the kernel showed it read (null: margin used)
 */
export async function startInFlight(ctx, path, { timeoutMs = 10000 } = {}) {
  let sent;
  const sentPromise = new Promise((resolve) => (sent = resolve));
  const localAddress = ON_LINUX ? LOCAL_ADDRESS : undefined;
  let settled = false;
  const result = request(ctx.port, path, { timeoutMs, localAddress, onSent: () => sent(performance.now()) });
  result.then(() => (settled = true));
  const sentAt = await Promise.race([sentPromise, result.then(() => performance.now())]);
  if (settled) return { result, sentAt, readMs: null }; // refused or reset: the step reports it
  if (ON_LINUX) {
    const read = await ctx.poll(() => requestRead(ctx.port), { timeoutMs: 2000, intervalMs: 5 });
    if (read.ok) return { result, sentAt, readMs: Math.round(performance.now() - sentAt) };
  }
  const wait = FALLBACK_MARGIN_MS - (performance.now() - sentAt);
  if (wait > 0) await sleepFor(wait, ctx.signal);
  return { result, sentAt, readMs: null };
}

/** True once the server side of our connection from 127.0.0.9 has nothing left to read. */
function requestRead(port) {
  // Server side (local port `port`, remote 127.0.0.9, plain or v4-mapped in
  // tcp6), ESTABLISHED (01); group 1: its receive queue. One regex over the
  // whole table, not a split of every row: after a few thousand verifies the
  // tables hold tens of thousands of TIME_WAIT rows (38,000 seen in stress),
  // and splitting them took 600 ms a look, so the request was seen read long
  // after it was.
  const hexPort = port.toString(16).toUpperCase().padStart(4, '0');
  const row = new RegExp(`^ *\\d+: [0-9A-F]+:${hexPort} [0-9A-F]*${LOCAL_HEX}:[0-9A-F]{4} 01 [0-9A-F]{8}:([0-9A-F]{8})`, 'gm');
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const [, rxQueue] of text.matchAll(row)) if (parseInt(rxQueue, 16) === 0) return true;
  }
  return false;
}

/**
 * A request in flight on a keep-alive connection: from 127.0.0.9, `GET /`
 * first (its answer names the worker that owns the connection), then `path`
 * on the same connection; resolves once a worker has read it. With `then`,
 * the connection goes on sending `then` back to back afterwards, as a busy
 * keep-alive client does: a connection certainly busy when a server closes,
 * so one that server.close() cannot end.
 * @returns {Promise<{ pid: number|undefined, result: Promise<object>, readMs: number|null, results: object[],
 *   stop(): Promise<object[]> }>} pid: the worker holding the connection; result: the outcome of `path`
 *   (see lib/harness/keepalive.js); results: every outcome on the connection
 *   outliveStep: keep sending after the step ends (stop() ends it; register it with ctx.onTeardown)
 */
export async function startKeepAliveInFlight(ctx, path, { timeoutMs = 10000, then, outliveStep = false } = {}) {
  let sentAt = null;
  let markSent;
  const sent = new Promise((resolve) => (markSent = resolve));
  const client = keepAliveSequence(ctx.port, ['/', path], {
    timeoutMs,
    localAddress: ON_LINUX ? LOCAL_ADDRESS : undefined,
    // With outliveStep the caller stops it (a check in a later step reads it).
    signal: outliveStep ? undefined : ctx.signal,
    then,
    onSent: (p, seq) => {
      if (seq === 1) {
        sentAt = performance.now();
        markSent();
      }
    },
  });
  const { results } = client;
  client.done.then(() => markSent()); // the first request failed: nothing more is sent
  let settle;
  const result = new Promise((resolve) => (settle = resolve));
  const watchResult = () => (results[1] ? settle(results[1]) : setTimeout(watchResult, 5));
  watchResult();
  client.done.then(() => settle(results[1] ?? { path, outcome: 'unanswered', code: results[0]?.code ?? 'NOT_SENT', bytes: 0 }));
  await sent;
  const base = { results, stop: () => client.stop() };
  const pid = results[0]?.pid;
  if (sentAt === null) return { ...base, pid, result, readMs: null };
  let settled = false;
  result.then(() => (settled = true));
  if (ON_LINUX) {
    const read = await ctx.poll(() => settled || requestRead(ctx.port), { timeoutMs: 2000, intervalMs: 5 });
    if (read.ok) return { ...base, pid, result, readMs: Math.round(performance.now() - sentAt) };
  }
  const wait = FALLBACK_MARGIN_MS - (performance.now() - sentAt);
  if (wait > 0) await sleepFor(wait, ctx.signal);
  return { ...base, pid, result, readMs: null };
}
