// When retired workers exit, and whether they outlived their drain. A retired
// worker that stays alive long after its last connection ended shows only in
// its exit time: it answers nothing late, it just lingers (a timer that is
// not unref()'d, a channel to the primary never disconnected). Only known
// pids are watched, one small /proc read each per look: shared/sampler.js
// sees exits too, but also scans the whole process table for new workers,
// more than a restart under load needs from the verifier's CPU.
import { isAlive } from '../../lib/harness/processes.js';
import { DRAIN_MS, DRAIN_TOLERANCE_MS } from './drain.js';

// How often the table is looked at; an exit is known this late at most.
export const EXIT_POLL_MS = 20;

const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

/**
 * Starts watching `pids`.
 * @returns {{ exitedAt: Map<number, number>, stop(): void }} exitedAt: pid -> performance.now() when first seen gone
 */
export function watchExits(pids) {
  const exitedAt = new Map();
  const look = () => {
    for (const pid of pids) if (!exitedAt.has(pid) && !isAlive(pid)) exitedAt.set(pid, performance.now());
    if (exitedAt.size === pids.length) clearInterval(timer);
  };
  const timer = setInterval(look, EXIT_POLL_MS);
  timer.unref();
  look();
  return {
    exitedAt,
    stop() {
      look();
      clearInterval(timer);
    },
  };
}

// Keep-alive outcomes say 'ok'; plain requests (lib/harness/http.js) say ok: true.
const answered = (r) => (r.outcome !== undefined ? r.outcome === 'ok' : r.ok === true);

/**
 * Retired workers that stayed alive longer than the drain allows: a worker
 * retired at t exits by t + DRAIN_MS + what its requests in flight at t still
 * needed (the same deadline as its answers, shared/drain.js). One that
 * answers nothing late and still lingers is kept alive by something other
 * than its clients.
 * @param {Map<number, number>} exitedAt pid -> when it was seen gone (watchExits)
 * @param {Map<number, number>} retiredAt pid -> when it stopped accepting
 * @param {object[]} answers every request with pid, start, end, outcome or ok (keep-alive, in flight, load)
 * @param {{ now: number, slackMs?: number }} o now: when the check runs (a worker still alive has not exited by then);
 *   slackMs: how late an exit may be seen (the watcher's poll)
 * @returns {{ pid: number, retiredAt: number, deadline: number, exitAt: number, alive: boolean, lastAnswerAt: number,
 *   lingeredMs: number }[]} worst first; lingeredMs: from its last answer (or its retirement) to its exit
 */
export function lateExits(exitedAt, retiredAt, answers, { now, drainMs = DRAIN_MS, toleranceMs = DRAIN_TOLERANCE_MS, slackMs = 0 }) {
  const found = [];
  for (const [pid, at] of retiredAt) {
    const mine = answers.filter((r) => r.pid === pid && answered(r));
    const inFlightEnd = Math.max(at, ...mine.filter((r) => r.start < at).map((r) => r.end));
    const deadline = inFlightEnd + drainMs + toleranceMs + slackMs;
    const alive = !exitedAt.has(pid);
    const exitAt = alive ? now : exitedAt.get(pid);
    if (exitAt <= deadline) continue;
    const lastAnswerAt = Math.max(at, ...mine.map((r) => r.end));
    found.push({ pid, retiredAt: at, deadline, exitAt, alive, lastAnswerAt, lingeredMs: Math.round(exitAt - lastAnswerAt) });
  }
  return found.sort((a, b) => b.exitAt - b.deadline - (a.exitAt - a.deadline));
}

/** The failure of a retired worker that outlived its drain with nothing left to answer: it lists causes, asserts none. */
export function lateExitFailure(worst, { what = 'its disconnect', all = [worst], shutdownTimeoutMs } = {}) {
  const others = all.length > 1 ? ` (and ${all.length - 1} more worker${all.length > 2 ? 's' : ''})` : '';
  const span = seconds(worst.exitAt - worst.retiredAt);
  return {
    message: `Retired worker ${worst.pid} ${worst.alive ? `was still running ${span}` : `exited only ${span}`} after ${what}${others}, ${seconds(worst.lingeredMs)} after its last answer.`,
    expected: `worker ${worst.pid} exits within ${DRAIN_MS / 1000} s after ${what}, plus what its requests in flight still need (here by ${seconds(worst.deadline - worst.retiredAt)} after it)`,
    actual: `${worst.alive ? 'still alive' : 'it exited'} ${span} after ${what}; ${
      worst.lastAnswerAt - worst.retiredAt < 100 ? 'it answered nothing after that' : `its last answer to the verifier's clients came ${seconds(worst.lastAnswerAt - worst.retiredAt)} after it`
    }`,
    explanation:
      "Nothing the verifier sent kept it busy: something else kept the worker alive after its server closed. Possible causes: a timer that is not unref()'d (the time-limit timer" +
      `${shutdownTimeoutMs ? `, here SHUTDOWN_TIMEOUT=${shutdownTimeoutMs} ms,` : ''} or a heartbeat interval); the channel to the primary, when the worker is told to stop by a message and never disconnected (worker.disconnect() in the primary, or process.disconnect() in the worker, closes it), so that it lives until a kill; an open connection to a database or another service; or another open handle (a second server, a file watcher).`,
    hint: "retire with worker.disconnect(); unref() the worker's time-limit timer and intervals; close the worker's other connections once its server has closed.",
  };
}
