// What happens after a stop signal: which workers were forked after it, when
// the primary exited and with what, and which of its processes were still
// running at that moment. Started before the signal; read by later steps.
import { watchWorkers } from './sampler.js';

const EXIT_DEADLINE_MS = 5000;
// A worker seen alive at the primary's exit that is gone this soon after was
// already on its way out (the primary saw it disconnect, not yet exit).
const SURVIVOR_GRACE_MS = 300;

/**
 * @returns {{ signal: string, signalAt: number|null, workers: object, initial: number[],
 *   atExit: Promise<{ exit, exitAt, survivors: object[], lingering: object[] }>, sent(): void }}
 *   survivors: alive at the primary's exit; lingering: still alive SURVIVOR_GRACE_MS after it
 */
export function watchShutdown(ctx, signal) {
  const program = ctx.program;
  const watch = {
    signal,
    signalAt: null,
    workers: watchWorkers(ctx),
    program,
    sent() {
      watch.signalAt = performance.now();
    },
  };
  watch.initial = watch.workers.initial;
  watch.atExit = program.exitPromise.then(async (exit) => {
    const exitAt = performance.now();
    // Right away: the processes of the group still running when the primary
    // was gone (its workers keep the group's id after it exits). Those still
    // there SURVIVOR_GRACE_MS later were not merely on their way out. Decided
    // here, in the background, because the step that reads it may come later.
    const survivors = program.processes({ includeMarked: false }).filter((p) => p.pid !== program.pid);
    const deadline = exitAt + SURVIVOR_GRACE_MS;
    let lingering = survivors;
    while (lingering.length && performance.now() < deadline) {
      await new Promise((r) => setTimeout(r, 20));
      const alive = new Set(program.processes({ includeMarked: false }).map((p) => p.pid));
      lingering = lingering.filter((p) => alive.has(p.pid));
    }
    return { exit, exitAt, survivors, lingering };
  });
  return watch;
}

/** Waits for the primary's exit, at most until 5 s after the signal; null when it did not exit. */
export async function exitWithinDeadline(watch) {
  const left = watch.signalAt + EXIT_DEADLINE_MS - performance.now();
  const exit = await watch.program.waitForExit(Math.max(0, left));
  if (!exit) return null;
  return watch.atExit;
}

export { EXIT_DEADLINE_MS, SURVIVOR_GRACE_MS };
