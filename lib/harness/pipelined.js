// HTTP/1.1 pipelining: several requests written at once on one connection.
// The server's parser reads them from one packet and starts them all in the
// same turn of its event loop, so one worker certainly holds several requests
// at once: the only way, from outside, to be sure a program is tested with
// two requests in flight in the same process. Node's own client never
// pipelines, hence this small client. Results have the shape of request()'s.
import net from 'node:net';
import { parseBody } from './http.js';

/**
 * Sends `count` identical requests on one fresh connection, written in one
 * go (the last one asks to close the connection), and resolves one result
 * per request, in order. A request without a complete response once the
 * connection ends or timeoutMs passes failed (code 'TIMEOUT' when it hung).
 *
 * @param {{ method?: string, count?: number, timeoutMs?: number, localAddress?: string, signal?: AbortSignal,
 *   gate?: Promise<void>, onConnected?: Function }} [options]
 *   gate: connect now, write the requests once it resolves; onConnected: once the connection is up (or failed)
 */
export function pipelined(port, path, { method = 'GET', count = 2, timeoutMs = 5000, localAddress, signal, gate, onConnected } = {}) {
  const host = '127.0.0.1';
  const url = `http://${host}:${port}${path}`;
  const started = performance.now();
  const head = `${method} ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\n${method === 'GET' ? '' : 'Content-Length: 0\r\n'}`;
  const payload = Array.from({ length: count }, (_, i) => `${head}${i === count - 1 ? 'Connection: close\r\n' : ''}\r\n`).join('');

  return new Promise((resolve) => {
    const socket = net.connect({ port, host, localAddress });
    let received = Buffer.alloc(0);
    let settled = false;
    let told = false;
    const tell = () => !told && (told = true) && onConnected?.();
    const finish = (failure, { ended = false } = {}) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      socket.destroy();
      tell();
      const { responses } = parseResponses(received, { ended });
      const ms = Math.round(performance.now() - started);
      resolve(
        Array.from({ length: count }, (_, i) => {
          const base = { method, url, localAddress, ms, pipelined: { index: i + 1, of: count } };
          const r = responses[i];
          if (!r) return { ...base, ok: false, ...failure };
          return { ...base, ok: true, status: r.status, headers: r.headers, text: r.text, ...parseBody(r.text) };
        }),
      );
    };
    const timer = setTimeout(() => finish({ code: 'TIMEOUT', error: `no response within ${timeoutMs} ms` }), timeoutMs);
    const onAbort = () => finish({ code: 'ABORTED', error: 'request aborted' });
    signal?.addEventListener('abort', onAbort, { once: true });

    socket.once('connect', () => {
      tell();
      const send = () => !settled && socket.write(payload);
      if (gate) gate.then(send);
      else send();
    });
    socket.on('data', (chunk) => {
      received = Buffer.concat([received, chunk]);
      if (parseResponses(received).responses.length === count) finish({});
    });
    socket.on('error', (err) => finish({ code: err.code ?? 'ERROR', error: err.message }));
    socket.on('close', () =>
      finish({ code: 'ECONNRESET', error: 'the connection closed before this pipelined request was answered' }, { ended: true }),
    );
  });
}

/**
 * The complete responses at the start of buf: [{ status, headers, text }].
 * A body is delimited by content-length, chunked encoding, or (ended: the
 * connection has closed) the end of the data.
 */
export function parseResponses(buf, { ended = false } = {}) {
  const responses = [];
  let at = 0;
  for (;;) {
    const headEnd = buf.indexOf('\r\n\r\n', at);
    if (headEnd < 0) break;
    const [statusLine, ...lines] = buf.subarray(at, headEnd).toString('latin1').split('\r\n');
    const status = Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine)?.[1]);
    const headers = {};
    for (const line of lines) {
      const colon = line.indexOf(':');
      if (colon > 0) headers[line.slice(0, colon).trim().toLowerCase()] = line.slice(colon + 1).trim();
    }
    const bodyStart = headEnd + 4;
    let body;
    let next;
    if (/chunked/i.test(headers['transfer-encoding'] ?? '')) {
      const parts = [];
      let p = bodyStart;
      for (;;) {
        const lineEnd = buf.indexOf('\r\n', p);
        if (lineEnd < 0) return { responses };
        const size = parseInt(buf.subarray(p, lineEnd).toString('latin1'), 16);
        if (Number.isNaN(size)) return { responses };
        if (size === 0) {
          // The last chunk, then trailers (usually none) up to an empty line.
          const end = buf.indexOf('\r\n\r\n', lineEnd);
          if (end < 0) return { responses };
          next = end + 4;
          break;
        }
        if (buf.length < lineEnd + 2 + size + 2) return { responses };
        parts.push(buf.subarray(lineEnd + 2, lineEnd + 2 + size));
        p = lineEnd + 2 + size + 2;
      }
      body = Buffer.concat(parts);
    } else if (headers['content-length'] !== undefined) {
      const length = Number(headers['content-length']);
      if (buf.length < bodyStart + length) break;
      body = buf.subarray(bodyStart, bodyStart + length);
      next = bodyStart + length;
    } else if (status === 204 || status === 304) {
      body = Buffer.alloc(0);
      next = bodyStart;
    } else {
      if (!ended) break;
      body = buf.subarray(bodyStart);
      next = buf.length;
    }
    responses.push({ status, headers, text: body.toString('utf8') });
    at = next;
    if (Number.isNaN(status)) break;
  }
  return { responses };
}

/** A shell command that repeats a pipelined request, for failure messages. */
export function pipelinedReproduce(port, path, { method = 'GET', count = 2 } = {}) {
  const one = `${method} ${path} HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nContent-Length: 0\\r\\n`;
  const all = Array.from({ length: count }, (_, i) => `${one}${i === count - 1 ? 'Connection: close\\r\\n' : ''}\\r\\n`).join('');
  return `printf '${all}' | nc 127.0.0.1 ${port}   # ${count} requests in one packet`;
}
