// The fork watchdog: a program that forks without limit (the forking code
// also runs in the workers, or an exit handler forks several replacements per
// death) would fill the machine within moments. Every launch of a learner's
// program (verify, run, bench) is watched by this one, with one limit, so
// `run` and `verify` never judge the same program differently.
import { cpus } from 'node:os';
import { StepFailure } from './failure.js';

const WATCHDOG_MS = 200;
// How many processes a program may have before it counts as forking without
// limit: the primary, three sets of workers (a rolling restart has old and
// new workers side by side, and a program that runs two restarts at once
// briefly has three sets, a bounded mistake with its own message), and a few
// helpers. Forking without limit outgrows any such bound within moments.
const WORKER_SETS = 3;
const EXTRA_PROCESSES = 4;

/** The most processes a program asked for `workers` workers may have. */
export function forkLimit(workers) {
  return 1 + WORKER_SETS * workers + EXTRA_PROCESSES;
}

/**
 * Checks the process count of ctx.program every 200 ms; over the limit, kills
 * the program at once and calls onTrip(failure) with the StepFailure that
 * says so (once). Returns a function that ends the watch.
 *
 * @param {{ program: import('./program.js').LearnerProgram | null, expectedWorkers: number }} ctx
 */
export function watchForks(ctx, onTrip, intervalMs = WATCHDOG_MS) {
  const timer = setInterval(() => {
    const program = ctx.program;
    if (!program || program.exited) return;
    // Under a prefix (the containers lesson), its own process leads the group,
    // and a program confined to a CPU set that counts the host's CPUs
    // (os.cpus().length) forks a bounded number too many: a mistake a step
    // names, not a fork bomb.
    const workers = Math.max(ctx.expectedWorkers, program.prefix?.cpus ? cpus().length : 0);
    const limit = forkLimit(workers) + (program.prefix ? 1 : 0);
    const count = program.processes({ includeMarked: false }).length;
    if (count <= limit) return;
    clearInterval(timer);
    program.killNow();
    onTrip(forkedWithoutLimit({ count, limit, workers: ctx.expectedWorkers, lastLines: program.lastLines(8) }));
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

export function forkedWithoutLimit({ count, limit, workers, lastLines }) {
  const failure = new StepFailure(`Your program started ${count} processes and kept going, so the verifier stopped it.`, {
    expected: `the primary and ${workers} workers (at most ${limit} processes, room for a rolling restart)`,
    actual: `${count} processes`,
    explanation:
      'Forking without limit usually means the code that forks also runs in the workers (no cluster.isPrimary check), or an exit handler forks several replacements per death.',
    hint: 'fork only in the primary: if (cluster.isPrimary) { ...fork WORKERS times... } else { ...listen... }',
    outputLines: lastLines,
  });
  failure.forkBomb = { count, limit };
  return failure;
}
