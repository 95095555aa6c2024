// Stretches, on purpose, the moment a rolling restart can get wrong: the
// time between a new worker's 'online' and its 'listening'. 'online' comes as
// soon as the new process runs (before it has loaded the program's code);
// 'listening' once it listens. A program that retires the old worker on
// 'online' is short of a worker in between: 100 to 200 ms on an idle
// machine, which a sampler misses in most runs. So the verifier watches each
// new worker's first message to the primary (the 'online' message: the first
// write of more than a few bytes, in /proc/<pid>/io) and pauses the worker
// (SIGSTOP) for HOLD_MS right then, as a loaded machine would. A program
// that waits for 'listening' keeps its old worker serving meanwhile and
// does not notice; one that retired it on 'online' runs short for the whole
// hold, every run. Until a new worker says 'online' it runs in short steps,
// during which the primary is paused, so that no step can take it past
// 'listening' however late the watcher wakes. Linux only (elsewhere it does
// nothing). The watching runs in a thread of its own
// (shared/throttle-thread.js).
import { Worker } from 'node:worker_threads';
import { trySignal } from '../../lib/harness/processes.js';
import { pollUntil } from '../../lib/harness/wait.js';

export const HOLD_MS = 1000;
const SCAN_MS = 2;
// A watched worker runs this long between looks (and the primary as long
// between steps).
const RUN_MS = 1;
// What a new worker has written (/proc/<pid>/io) tells how far it got. Its
// messages to the primary, measured on Node 20, 22 and 24: 'online' 46 bytes;
// then, once the program listens, 'queryServer' (asks the primary for the
// server: 125 to 146 bytes) and, after the primary's answer, 'listening'
// (127 to 144 bytes). Before 'online' a starting Node writes only a byte or
// two (wake-ups of its event loop). A worker first seen late, having run
// unwatched, is held only if it cannot have said 'listening' yet (all three
// messages are at least 298 bytes); past LISTENING_BYTES it is let go
// unheld. A worker paused after 'queryServer' may already be in the
// primary's round-robin and be handed one connection, which waits out the
// hold: a slow answer, not a dip.
const ONLINE_BYTES = 30;
const LISTENING_BYTES = 290;
const WATCH_MS = 8000; // a worker that never says 'online' is let go
const READY_MS = 5000; // how long the watcher thread may take to start
const RELEASE_SLACK_MS = 500; // stop() waits this long past the end of the last hold for its release

/**
 * Starts watching the primary's new children (shared/throttle-thread.js, a
 * thread of its own, so that a busy verifier still sees each one at once).
 * @param {object} ctx
 * @param {{ initial?: number[], primaryPid?: number }} [o] primaryPid: whose children to watch (the program's
 *   primary unless said: lesson beyond-one-machine runs two)
 * @returns {Promise<{ held: Map<number, { firstSeen: number, heldAt?: number, releasedAt?: number, missed?: boolean }>, heldUntil(): Map<number, number>, stop(): Promise<void> }>}
 *   resolves once the watcher has made its first scan, so a signal sent after
 *   it finds the watcher running (a thread takes tens of milliseconds to
 *   start: a fork before that was seen too late, in half the runs of
 *   test/throttle-hold.test.js on an idle machine). Times are on this
 *   thread's performance.now() clock; missed: first seen when it may
 *   already have said 'listening': not held. stop() resolves once the
 *   holds under way have ended, the watcher has let every worker go and
 *   everything it saw is in held.
 */
export async function holdNewWorkersAtOnline(ctx, { initial = ctx.workers(), primaryPid = ctx.program.pid } = {}) {
  const held = new Map();
  // When each worker it held was let go (the end of its hold if not seen yet): shared/capacity.js counts it from then.
  const heldUntil = () => new Map([...held].filter(([, h]) => h.heldAt !== undefined).map(([pid, h]) => [pid, h.releasedAt ?? h.heldAt + HOLD_MS]));
  if (process.platform !== 'linux') return { held, heldUntil, stop: async () => {} };
  const control = new SharedArrayBuffer(4);
  const stopFlag = new Int32Array(control);
  const thread = new Worker(new URL('./throttle-thread.js', import.meta.url), {
    workerData: {
      primaryPid,
      initial,
      control,
      holdMs: HOLD_MS,
      scanMs: SCAN_MS,
      runMs: RUN_MS,
      onlineBytes: ONLINE_BYTES,
      listeningBytes: LISTENING_BYTES,
      watchMs: WATCH_MS,
    },
  });
  thread.unref(); // it never keeps the verifier alive
  const local = (epochMs) => epochMs - performance.timeOrigin;
  let watching;
  const ready = new Promise((resolve) => (watching = resolve));
  const finished = new Promise((resolve) => {
    thread.on('message', (m) => {
      if (m.ready) return watching();
      if (m.done) return resolve();
      const entry = held.get(m.pid) ?? {};
      for (const key of ['firstSeen', 'heldAt', 'releasedAt']) if (m[key] !== undefined) entry[key] = local(m[key]);
      if (m.missed) entry.missed = true;
      held.set(m.pid, entry);
    });
    thread.on('error', (err) => {
      ctx.log(`the watcher of new workers stopped: ${err.message}`);
      resolve();
    });
    thread.on('exit', () => resolve());
  });

  let stopping = null;
  const stop = () => {
    stopping ??= (async () => {
      // A hold runs its course: the caller may stop as soon as its restart
      // looks done in the process table (old workers gone, new ones alive),
      // which a program that retired on 'online' reaches while its
      // replacements are still held; letting them go then would shorten the
      // very dip the hold is there to show (capstone: 400 ms, and a pass).
      const holdsEnd = Math.max(0, ...[...held.values()].filter((h) => h.heldAt !== undefined).map((h) => h.heldAt + HOLD_MS));
      await pollUntil(() => [...held.values()].every((h) => h.heldAt === undefined || h.releasedAt !== undefined), {
        timeoutMs: Math.max(0, holdsEnd - performance.now()) + RELEASE_SLACK_MS,
        intervalMs: 20,
      });
      Atomics.store(stopFlag, 0, 1);
      Atomics.notify(stopFlag, 0);
      // Bounded: a watcher that cannot answer must not hold up the verdict.
      await Promise.race([finished, new Promise((r) => setTimeout(r, 1000).unref())]);
      // A thread ended mid-step leaves the primary and the worker paused.
      for (const pid of [primaryPid, ...held.keys()]) trySignal(pid, 'SIGCONT');
      await thread.terminate();
    })();
    return stopping;
  };
  ctx.onTeardown(stop); // never leave a learner's process stopped
  // Bounded: a thread that never starts leaves the restart unwatched, not stuck.
  await Promise.race([ready, finished, new Promise((r) => setTimeout(r, READY_MS).unref())]);
  return { held, heldUntil, stop };
}
