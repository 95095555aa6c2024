// Continuous load over fresh connections, for steps that must show no
// request fails while workers die or restart. Each request's start and end
// times are kept so a step can excuse exactly the requests that were in
// flight at the moment of a kill, and no others.
import { request } from './http.js';

/**
 * @param {number} port
 * @param {{ path?: string, concurrency?: number, timeoutMs?: number, localAddress?: string, localAddresses?: string[],
 *   host?: string, signal?: AbortSignal }} [o]
 *   the load also stops when signal aborts (the end of the step that started it); localAddresses: each
 *   request from the next of them in turn (several clients), instead of one localAddress
 * @returns {{ results: object[], stop(): Promise<object[]> }}
 */
export function startLoad(port, { path = '/', concurrency = 2, timeoutMs = 5000, localAddress, localAddresses, host, signal } = {}) {
  const results = [];
  let running = true;
  signal?.addEventListener('abort', () => (running = false), { once: true });
  const inFlight = new Set(); // { start, controller }
  let sent = 0;
  const loop = async () => {
    while (running) {
      const start = performance.now();
      const pending = { start, controller: new AbortController() };
      inFlight.add(pending);
      const from = localAddresses ? localAddresses[sent++ % localAddresses.length] : localAddress;
      const r = await request(port, path, { timeoutMs, localAddress: from, host, signal: pending.controller.signal });
      inFlight.delete(pending);
      const abandoned = pending.controller.signal.aborted;
      results.push({ ...r, start, end: performance.now(), ...(abandoned && { abandoned: true }) });
    }
  };
  const loops = Array.from({ length: concurrency }, loop);
  return {
    results,
    /**
     * Stops sending and waits for the requests in flight. abandon({ start })
     * picks in-flight requests not worth waiting for (a connection that a
     * killed worker took with it never answers, only times out): they end
     * at once as failures with code ABORTED and abandoned: true.
     */
    async stop({ abandon } = {}) {
      running = false;
      if (abandon) for (const p of inFlight) if (abandon(p)) p.controller.abort();
      await Promise.all(loops);
      return results;
    },
  };
}

/** A request failed when no answer came or the answer was not 200. */
export const failed = (r) => !r.ok || r.status !== 200;

/** Counts by cause, for failure messages: "3 refused, 1 reset". */
export function summarizeFailures(results) {
  const counts = new Map();
  for (const r of results.filter(failed)) {
    const cause = r.ok ? `status ${r.status}` : (r.code ?? 'error').toLowerCase().replace(/^econn/, '');
    counts.set(cause, (counts.get(cause) ?? 0) + 1);
  }
  return [...counts].map(([cause, n]) => `${n} ${cause}`).join(', ');
}
