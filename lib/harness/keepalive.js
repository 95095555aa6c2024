// Keep-alive clients that behave like real ones (Node's agent since Node 19,
// nginx upstreams, load balancers): each keeps one connection open and sends
// request after request on it, back to back, until the server says
// `Connection: close` or closes it. http.js opens a fresh connection per
// request on purpose; this is the other kind of traffic, the one that shows
// whether a server that stops tells its clients to leave.
//
// Like an HTTP/1.1 client (RFC 9112, 9.3.1), a request that was reset on a
// reused connection before any byte of its answer arrived is sent again,
// once, on a new connection: the server may close an idle keep-alive
// connection at the very moment the client reuses it. Such a request is
// recorded as a retry, not a failure. Everything else is recorded as it
// happened: a response cut after it began, a request that got no answer.
//
// Built on net and the response parser of pipelined.js, because the client
// must know how many bytes of an answer arrived before a connection ended,
// which Node's http client does not say.
import net from 'node:net';
import { parseResponses } from './pipelined.js';

const HOST = '127.0.0.1';
const PAUSE_MS = 2;

/**
 * One outcome per request:
 *   { conn, seq, path, reused, start, end, retried?, pid?, json?, status?, keepAlive?, outcome, bytes, code?, localAddress? }
 *   json: the answer's body when it is JSON
 *   outcome: 'ok' | 'cut' (part of an answer, then the connection ended) | 'unanswered' (no byte, even after a retry)
 *            | 'timeout' | 'refused' (a new connection refused)
 *   reused: sent on a connection that had answered before; keepAlive: the answer did not say Connection: close
 *   retried: the first attempt was reset before any byte on a reused connection, and this outcome is the retry's
 */

/** Sends one request on `socket` (or a new connection) and resolves its outcome and the socket to reuse (or null). */
function exchange(port, path, { socket, reused, timeoutMs, localAddress, onRead, host = HOST }) {
  return new Promise((resolve) => {
    const start = performance.now();
    let sock = socket;
    let received = Buffer.alloc(0);
    let done = false;
    const finish = (outcome, keep) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      sock.off('data', onData);
      sock.off('close', onClose);
      sock.off('error', onError);
      if (!keep) sock.destroy();
      resolve({ outcome: { ...outcome, start, end: performance.now(), bytes: received.length, reused }, socket: keep ? sock : null });
    };
    const onData = (chunk) => {
      received = Buffer.concat([received, chunk]);
      const { responses } = parseResponses(received);
      if (!responses.length) return;
      const r = responses[0];
      let json;
      try {
        json = JSON.parse(r.text);
      } catch {
        json = undefined;
      }
      const pid = json?.pid;
      const keepAlive = !/close/i.test(r.headers.connection ?? '');
      finish({ outcome: 'ok', status: r.status, pid: Number.isInteger(pid) ? pid : undefined, json, keepAlive, headers: r.headers }, keepAlive);
    };
    let errorCode;
    const onError = (err) => (errorCode = err.code ?? 'ERROR');
    const onClose = () => {
      if (received.length) return finish({ outcome: 'cut', code: errorCode ?? 'EOF' });
      if (!connected) return finish({ outcome: 'refused', code: errorCode ?? 'ECONNREFUSED' });
      finish({ outcome: 'unanswered', code: errorCode ?? 'EOF' });
    };
    const timer = setTimeout(() => finish({ outcome: 'timeout', code: 'TIMEOUT' }), timeoutMs);
    let connected = Boolean(sock);
    const send = () => {
      sock.write(`GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\n\r\n`);
      onRead?.();
    };
    if (!sock) {
      sock = net.connect({ port, host, localAddress });
      // Errors while the connection sits idle between requests are seen by
      // the next request (as a closed socket); never an uncaught error here.
      sock.on('error', () => {});
      sock.once('connect', () => {
        connected = true;
        send();
      });
    } else {
      send();
    }
    sock.on('data', onData);
    sock.on('close', onClose);
    sock.on('error', onError);
  });
}

/**
 * One keep-alive client: sends `next()`'s path (or stops when it returns null)
 * back to back on one connection, reconnecting when the server closed it.
 * Stops when `stopped()` says so, or after a refused new connection when
 * `endOnRefusal()` says the server is meant to be gone.
 */
async function runClient(port, conn, { next, stopped, endOnRefusal, results, timeoutMs, localAddress, host, onSent, retry = true }) {
  let socket = null;
  let served = 0; // answers on the current connection
  let seq = 0;
  while (!stopped()) {
    const path = next(seq);
    if (path === null) break;
    // The server closed the connection while it was idle: like Node's agent,
    // drop it and use a new one (no request was lost).
    if (socket && (socket.destroyed || !socket.writable || socket.readableEnded)) {
      socket.destroy();
      socket = null;
      served = 0;
    }
    const reused = served > 0;
    let { outcome, socket: kept } = await exchange(port, path, { socket, reused, timeoutMs, localAddress, host, onRead: () => onSent?.(path, seq) });
    if ((typeof retry === 'function' ? retry(seq) : retry) && outcome.outcome === 'unanswered' && reused) {
      // Reset before any byte on a reused connection: send it again, once, on a new one.
      const first = outcome;
      ({ outcome, socket: kept } = await exchange(port, path, { socket: null, reused: false, timeoutMs, localAddress, host }));
      outcome = { ...outcome, retried: true, start: first.start, firstCode: first.code };
    }
    results.push({ conn, seq, path, ...outcome });
    seq += 1;
    socket = kept;
    served = kept ? served + 1 : 0;
    if (outcome.outcome === 'refused' && endOnRefusal()) break;
    // A short pause between requests, as a client between two calls: the
    // connection stays open (reused), the verifier does not burn a core.
    await new Promise((r) => setTimeout(r, outcome.outcome === 'ok' ? PAUSE_MS : 5));
  }
  socket?.destroy();
}

/**
 * Starts `connections` keep-alive clients sending `path` back to back.
 * @param {number} port
 * @param {{ connections?: number, path?: string, timeoutMs?: number, endOnRefusal?: () => boolean, signal?: AbortSignal, firstConn?: number,
 *   localAddresses?: string[], host?: string }} [o]
 *   host: the address to connect to (default 127.0.0.1);
 *   firstConn: the number of the first connection (results name their connection), for several groups at once;
 *   localAddresses: client i connects from localAddresses[i % length] (several clients)
 * @returns {{ results: object[], stop(): Promise<object[]> }}
 */
export function startKeepAliveClients(port, { connections = 4, path = '/', timeoutMs = 5000, endOnRefusal = () => false, signal, firstConn = 1, localAddresses, host } = {}) {
  const results = [];
  let running = true;
  signal?.addEventListener('abort', () => (running = false), { once: true });
  const clients = Array.from({ length: connections }, (_, i) =>
    runClient(port, firstConn + i, { next: () => path, stopped: () => !running, endOnRefusal, results, timeoutMs, host, localAddress: localAddresses?.[i % localAddresses.length] }),
  );
  return {
    results,
    async stop() {
      running = false;
      await Promise.all(clients);
      return results;
    },
  };
}

/**
 * One keep-alive connection that sends `paths` in order (e.g. ['/', '/slow?ms=1000']),
 * then, with `then`, goes on sending `then` back to back until stopped (or
 * the connection ends and a new one is refused). onSent(path, index) is
 * called when each request is written. No retry for `paths`: the caller
 * knows such a request was read (a request in flight), so a reset is a drop.
 * @returns {{ results: object[], done: Promise<object[]>, stop(): Promise<object[]> }}
 */
export function keepAliveSequence(port, paths, { conn = 0, timeoutMs = 10000, localAddress, onSent, signal, then } = {}) {
  const results = [];
  let running = true;
  signal?.addEventListener('abort', () => (running = false), { once: true });
  const done = runClient(port, conn, {
    next: (seq) => (seq < paths.length ? paths[seq] : then ?? null),
    stopped: () => !running,
    endOnRefusal: () => true,
    results,
    timeoutMs,
    localAddress,
    onSent,
    retry: (seq) => seq >= paths.length,
  }).then(() => results);
  return {
    results,
    done,
    stop() {
      running = false;
      return done;
    },
  };
}
