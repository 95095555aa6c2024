// Slow requests sent one after another on fresh connections, so that every
// worker that retires while they run has some in flight with most of their
// time still to run. One slow request sent before a restart sits on one
// worker and is over before most retirements; a drain that cuts requests
// soon after close() (server.closeAllConnections() 200 ms later, a time
// limit of 1 s, a kill 1 s after disconnect) then passes in most runs. With
// one sent every intervalMs, round robin gives each worker several in the
// last (slowMs - 1000) ms before it retires: such a drain cuts one every run.
//
// Fresh connections that say Connection: close, not kept ones: a retired
// worker gets no new connection, so what it holds at its retirement is all
// it has to finish. A kept connection would send it one more slow request
// (answered with Connection: close), and its drain would last two.
import { setMaxListeners } from 'node:events';
import { request } from '../../lib/harness/http.js';

/**
 * Sends GET `path` every intervalMs on a new connection until `until()` is
 * true or stop() is called; each request is awaited in the background.
 * @param {{ path: string, intervalMs: number, timeoutMs: number, until: () => boolean }} o
 *   until: stop sending when it returns true (looked at before each send)
 * @returns {{ stop(): Promise<object[]>, stoppedAt(): number|null }} stop resolves with every
 *   outcome (as request's, with start and end); stoppedAt: when the last one was sent
 */
export function startSlowStream(ctx, { path, intervalMs, timeoutMs, until }) {
  const pending = [];
  let running = true;
  let lastSent = null;
  const controller = new AbortController();
  // Each request in flight listens on it (about 40 at once): past 10, Node
  // would print a MaxListenersExceededWarning to the learner.
  setMaxListeners(0, controller.signal);
  const onAbort = () => controller.abort();
  ctx.signal.addEventListener('abort', onAbort, { once: true });
  const loop = (async () => {
    while (running && !controller.signal.aborted && !until()) {
      const start = performance.now();
      lastSent = start;
      pending.push(
        request(ctx.port, path, { timeoutMs, host: ctx.program?.host ?? undefined, signal: controller.signal }).then((r) => ({
          ...r,
          start,
          end: performance.now(),
        })),
      );
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  })();
  return {
    stoppedAt: () => lastSent,
    async stop() {
      running = false;
      await loop;
      const results = await Promise.all(pending);
      ctx.signal.removeEventListener('abort', onAbort);
      return results;
    },
  };
}

/**
 * How much longer than its limit a restart may take for the verifier's
 * own slow requests: for each retired worker, how long after it stopped
 * accepting the last slow request it already had was answered. Summed: a
 * restart that waits for each old worker to exit before forking the next
 * waits for each of those in turn (one that does not wait gets more than it
 * needs, which hides nothing: a worker never retired or kept alive after
 * its drain is still there at the later deadline).
 * @param {Map<number, number>} stoppedAccepting pid -> when it stopped accepting new connections
 * @param {object[]} slowAnswers the slow requests' outcomes, each with pid, ok, start, end
 * @returns {number} ms
 */
export function slowRequestsNeed(stoppedAccepting, slowAnswers) {
  let need = 0;
  for (const [pid, at] of stoppedAccepting) {
    const ends = slowAnswers.filter((r) => r.pid === pid && r.ok && r.start < at).map((r) => r.end - at);
    need += Math.max(0, ...ends);
  }
  return Math.round(need);
}
