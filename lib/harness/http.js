// An HTTP client for probing learner programs. Every request opens a fresh
// connection (agent: false): keep-alive would pin the client to one worker
// and hide how the cluster spreads connections. Every request is bounded by
// a timeout, and a hung request counts as failed. It never throws: the
// result says what happened, so that steps can count failures.
import http from 'node:http';

export const DEFAULT_TIMEOUT_MS = 5000;

/**
 * @param {{ method?: string, body?: any, headers?: object, timeoutMs?: number, localAddress?: string,
 *   host?: string, signal?: AbortSignal, onSent?: Function, onConnected?: Function, gate?: Promise<void> }} [options]
 *   gate: connect now, send the request once it resolves; onConnected: called once the connection is up (or failed)
 * @returns {Promise<{ ok: boolean, status?: number, headers?: object, text?: string,
 *   json?: any, pid?: number, error?: string, code?: string, ms: number,
 *   method: string, url: string, localAddress?: string }>}
 *   ok is true when an HTTP response arrived (whatever its status).
 */
export function request(port, path, options = {}) {
  const {
    method = 'GET',
    body,
    headers = {},
    timeoutMs = DEFAULT_TIMEOUT_MS,
    localAddress,
    host = '127.0.0.1',
    signal,
    onSent,
    onConnected,
    gate,
  } = options;
  const started = performance.now();
  const url = `http://${host}:${port}${path}`;
  const payload =
    body === undefined ? undefined : typeof body === 'string' ? body : JSON.stringify(body);
  const base = { method, url, localAddress, body: payload };

  return new Promise((resolve) => {
    let settled = false;
    const finish = (result) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      signal?.removeEventListener('abort', onAbort);
      resolve({ ...base, ...result, ms: Math.round(performance.now() - started) });
    };
    const req = http.request({
      host,
      port,
      path,
      method,
      agent: false,
      localAddress,
      headers: {
        connection: 'close',
        ...(payload !== undefined && {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
        }),
        ...headers,
      },
    });
    const timer = setTimeout(() => {
      finish({ ok: false, code: 'TIMEOUT', error: `no response within ${timeoutMs} ms` });
      req.destroy();
    }, timeoutMs);
    const onAbort = () => {
      finish({ ok: false, code: 'ABORTED', error: 'request aborted' });
      req.destroy();
    };
    signal?.addEventListener('abort', onAbort, { once: true });

    req.on('error', (err) => finish({ ok: false, code: err.code ?? 'ERROR', error: describeError(err) }));
    req.on('response', (res) => {
      const chunks = [];
      res.on('data', (c) => chunks.push(c));
      res.on('error', (err) => finish({ ok: false, code: err.code ?? 'ERROR', error: describeError(err) }));
      res.on('end', () => {
        const text = Buffer.concat(chunks).toString('utf8');
        finish({ ok: true, status: res.statusCode, headers: res.headers, text, ...parseBody(text) });
      });
    });
    if (onSent) req.on('finish', onSent);
    // With a gate, the connection opens now but the request is sent only
    // when the gate resolves: a burst whose requests all arrive at once.
    // onConnected fires once, when the connection is up or has failed.
    if (onConnected) {
      let told = false;
      const tell = () => !told && (told = true) && onConnected();
      req.once('socket', (socket) => socket.once('connect', tell));
      req.once('close', tell);
    }
    const send = () => {
      if (settled) return;
      if (payload !== undefined) req.write(payload);
      req.end();
    };
    if (gate) gate.then(send);
    else send();
  });
}

/** A response body as JSON when it is, and the pid it names: { json, pid }. */
export function parseBody(text) {
  let json;
  try {
    json = JSON.parse(text);
  } catch {
    json = undefined;
  }
  const pid = json && typeof json === 'object' && Number.isInteger(json.pid) ? json.pid : undefined;
  return { json, pid };
}

function describeError(err) {
  switch (err.code) {
    case 'ECONNREFUSED':
      return 'connection refused (nothing is listening on that port)';
    case 'ECONNRESET':
      return 'connection reset (the process closed the socket without answering)';
    case 'EADDRNOTAVAIL':
      return 'address not available';
    default:
      return err.message;
  }
}

/** The curl command that repeats a request, for failure messages. */
export function curlFor(result) {
  const parts = ['curl -s'];
  if (result.method && result.method !== 'GET') parts.push(`-X ${result.method}`);
  if (result.localAddress) parts.push(`--interface ${result.localAddress}`);
  if (result.body !== undefined) {
    parts.push(`-H 'content-type: application/json' -d '${result.body.replace(/'/g, "'\\''")}'`);
  }
  // Quoted when the shell would read a character of it (zsh globs on "?").
  parts.push(/^[\w:/.@%+=,-]+$/.test(result.url) ? result.url : `'${result.url.replace(/'/g, "'\\''")}'`);
  return parts.join(' ');
}

/** One line describing what came back, for "actual:" in failure messages. */
export function describeResult(result) {
  if (!result.ok) return result.error;
  const shown = result.text.length > 200 ? `${result.text.slice(0, 200)}...` : result.text;
  return `status ${result.status}, body ${shown || '(empty)'}`;
}
