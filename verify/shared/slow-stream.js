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

// A slow request reset this soon after it was sent may have been turned
// away, not cut in flight: a worker that resets the connections it is handed
// while it drains (it never closed its server) does that to the load as
// well, and the check of failed requests names that. Under 2 CPU hogs such
// a reset came 238 ms after the send (the primary's hand-over was that
// slow); a drain that cuts requests 200 ms after close() still cuts those
// sent over 300 ms before the worker retired, several every run.
export const TURNED_AWAY_MS = 500;

/**
 * The stream's requests cut in flight: reset after they had run a while, or
 * answered with a status other than 200. A refusal, a request that got no
 * answer at all (nobody took its connection) and one turned away at once are
 * left to the check of failed requests: the load meets them too.
 * @param {object[]} results startSlowStream's outcomes
 * @returns {object[]}
 */
export function cutInFlight(results, { turnedAwayMs = TURNED_AWAY_MS } = {}) {
  return results.filter((r) => !r.abandoned && (r.ok ? r.status !== 200 : r.code !== 'ECONNREFUSED' && r.code !== 'TIMEOUT' && r.end - r.start >= turnedAwayMs));
}

/**
 * The failure of a restart that cut slow requests in flight; it lists causes, asserts none.
 * @param {{ cut: object[], sent: number, signalAt: number, path: string, intervalMs: number, shutdownTimeoutMs: number, what: string, describe: (r: object) => string }} o
 *   sent: how many the stream sent; what: 'the restart', 'the rolling restart'; describe: how an outcome reads (lib/harness/http.js describeResult)
 */
export function streamCutFailure({ cut, sent, signalAt, path, intervalMs, shutdownTimeoutMs, what, describe }) {
  const first = cut[0];
  return {
    message: `${cut.length} of ${sent} ${path} requests ${cut.length === 1 ? 'was' : 'were'} cut off in flight during ${what}.`,
    expected: `every request a retiring worker has already read is answered with 200 (it has until SHUTDOWN_TIMEOUT=${shutdownTimeoutMs} ms)`,
    actual: `${describe(first)}: sent ${Math.round(first.start - signalAt)} ms after SIGUSR2, it ended ${Math.round(first.end - first.start)} ms later${cut.length > 1 ? ` (and ${cut.length - 1} more)` : ''}`,
    explanation:
      `One ${path} was sent every ${intervalMs} ms on a new connection until the last replacement was forked, so each old worker retired meanwhile had some in flight with over 1 s still to run. Possible causes: server.closeAllConnections(), or socket.destroy() on every socket, well before SHUTDOWN_TIMEOUT; a time limit of the worker's own shorter than your slowest request (one that does not read SHUTDOWN_TIMEOUT; http-terminator's gracefulTerminationTimeout is 1000 ms unless set); the primary killing a retired worker early (worker.kill(), a kill timer shorter than SHUTDOWN_TIMEOUT, or a heartbeat check that kills a worker whose heartbeats stopped because it was disconnected); the worker exiting (process.exit) before its requests were done.`,
    hint: 'Let the drain finish the requests it has: close the server (worker.disconnect() does), answer with Connection: close, end the rest only at SHUTDOWN_TIMEOUT, and kill a retired worker only after that.',
  };
}
