// Starts a learner's program the way the verifier does (LearnerProgram, the
// lesson's environment) on a port the caller chose, and waits until it
// answers, with the verifier's own readiness check. Used by `run` and `bench`.
import { StepContext } from '../../harness/context.js';
import { LearnerProgram } from '../../harness/program.js';
import { waitUntilReady } from '../../harness/readiness.js';
import { memoryStore } from '../../harness/runner.js';

// As in the runner: more processes than primary + workers + this many means
// the program forks without limit.
const EXTRA_PROCESSES = 4;

/** The environment the verifier's first start uses: the lesson's env with bootEnv over it. */
export function verifierEnv(verifier) {
  return { ...(verifier.env ?? {}), ...(verifier.bootEnv ?? {}) };
}

/**
 * A StepContext whose program is started but not yet ready. Call ready()
 * next, and ctx.stopProgram() in every case.
 */
export function bootProgram({ file, verifier, env = verifierEnv(verifier), port, onLine = () => {}, log = () => {}, signal, readyTimeoutMs = 15000 }) {
  const ctx = new StepContext({
    file,
    lessonEnv: env,
    reporter: { stepLog: log, programLine: onLine },
    store: memoryStore(),
    readyTimeoutMs,
    verifier,
  });
  if (signal) ctx.signal = signal;
  ctx.program = new LearnerProgram({ file, port, env, onLine });
  ctx.program.start();
  return {
    ctx,
    /** Resolves once GET / answers (and every worker has); throws the verifier's StepFailure otherwise. */
    ready: () => waitUntilReady(ctx, { timeoutMs: readyTimeoutMs }),
  };
}

/**
 * Stops the program at once when it forks far more processes than asked,
 * as the verifier does. Returns a function that ends the watch.
 */
export function watchForkBomb(ctx, onTrip, intervalMs = 200) {
  const timer = setInterval(() => {
    const program = ctx.program;
    if (!program || program.exited) return;
    const limit = 1 + ctx.expectedWorkers + EXTRA_PROCESSES;
    const count = program.processes({ includeMarked: false }).length;
    if (count > limit) {
      clearInterval(timer);
      program.killNow();
      onTrip(count, limit);
    }
  }, intervalMs);
  timer.unref();
  return () => clearInterval(timer);
}

/** "exited with code 1", "was killed by SIGKILL". */
export function describeExit(exit) {
  if (!exit) return 'stopped';
  if (exit.error) return `could not start (${exit.error.message})`;
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
}
