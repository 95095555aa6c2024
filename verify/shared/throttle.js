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
// hold, every run. Linux only (elsewhere it does nothing).
import { readFileSync } from 'node:fs';
import { isAlive, trySignal } from '../../lib/harness/processes.js';

export const HOLD_MS = 1000;
const SCAN_MS = 2;
const STEP_CLOCK = new Int32Array(new SharedArrayBuffer(4)); // only to wait on
const RUN_MS = 4;
// The 'online' message is about 46 bytes; before it a starting Node writes
// only a byte or two (wake-ups of its event loop). Its next message asks the
// primary for the server (queryServer, about 150 bytes): from then on the
// worker may already be handed connections, and pausing it would make a dip
// the program could not avoid. So a worker is held only while what it has
// written is between the two; one seen later (a starved verifier) is let go.
const ONLINE_BYTES = 30;
const QUERY_SERVER_BYTES = 150;
const WATCH_MS = 8000; // a worker that never says 'online' is let go

// The primary's children, from one small file (Linux 3.5+): cheap enough to
// read every few ms, unlike a scan of the whole process table, so that a new
// worker is seen within its first milliseconds. null when unavailable.
function childrenOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return null;
  }
}

function bytesWritten(pid) {
  try {
    return Number(/wchar:\s*(\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? 0);
  } catch {
    return null;
  }
}

/**
 * @param {object} ctx
 * @param {{ initial?: number[] }} [o]
 * @returns {{ held: Map<number, { firstSeen: number, heldAt?: number, releasedAt?: number, missed?: boolean }>, stop(): void }}
 *   missed: first seen past 'online' (already asking for the server): not held
 */
export function holdNewWorkersAtOnline(ctx, { initial = ctx.workers() } = {}) {
  const program = ctx.program;
  const known = new Set(initial);
  const held = new Map();
  const paused = new Set();
  let stopped = false;
  if (process.platform !== 'linux') return { held, stop() {} };

  // From its first sight until it has said 'online', a new worker runs in
  // short steps (RUN_MS, then paused and looked at), so its 'online' is seen
  // before it can also have asked for the server: the window is the loading
  // of its modules, many steps long even for a program of a few lines.
  const step = async (pid) => {
    const entry = held.get(pid);
    if (!trySignal(pid, 'SIGSTOP')) return;
    paused.add(pid);
    while (!stopped && performance.now() - entry.firstSeen < WATCH_MS) {
      // Stopped here: what has it written so far?
      const written = bytesWritten(pid);
      if (written === null || !isAlive(pid)) break;
      if (written >= QUERY_SERVER_BYTES) {
        entry.missed = true;
        break;
      }
      if (written >= ONLINE_BYTES) {
        entry.heldAt = performance.now();
        await new Promise((r) => setTimeout(r, HOLD_MS));
        entry.releasedAt = performance.now();
        break;
      }
      // One step: run RUN_MS, stopped again. Waited for synchronously, not
      // with a timer: a busy verifier's timer fires late, and the worker
      // would run on unwatched, past its 'online' and into listen.
      trySignal(pid, 'SIGCONT');
      Atomics.wait(STEP_CLOCK, 0, 0, RUN_MS);
      trySignal(pid, 'SIGSTOP');
      // The verifier's own work (its clients) runs between steps, the worker stopped meanwhile.
      await new Promise((r) => setImmediate(r));
    }
    trySignal(pid, 'SIGCONT');
    paused.delete(pid);
  };

  const scan = setInterval(() => {
    if (stopped || program.exited) return;
    for (const pid of childrenOf(program.pid) ?? program.workers()) {
      if (known.has(pid)) continue;
      known.add(pid);
      held.set(pid, { firstSeen: performance.now() });
      step(pid);
    }
  }, SCAN_MS);
  scan.unref();

  const stop = () => {
    stopped = true;
    clearInterval(scan);
    for (const pid of paused) trySignal(pid, 'SIGCONT');
    paused.clear();
  };
  ctx.onTeardown(stop); // never leave a learner's process stopped
  return { held, stop };
}
