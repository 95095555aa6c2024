// The one way a learner's program is launched: `verify` (through the runner's
// boot step), `run` and `bench` all start it here, with the same steps: the
// lesson's environment, its own process group (LearnerProgram), a new port
// when another program takes the chosen one first (the port race), readiness
// (GET / answers and every worker has), the fork watchdog with its one limit,
// and teardown. The runner owns a StepContext for its steps; `run` and `bench`
// get the same StepContext from launch() and only show what it gives them.
import { StepContext, memoryStore } from './context.js';
import { watchForks } from './watchdog.js';

/** The environment of the verifier's first start: the lesson's env with bootEnv over it. */
export function lessonEnvOf(verifier) {
  return { ...(verifier.env ?? {}), ...(verifier.bootEnv ?? {}) };
}

/**
 * Starts the program and watches it. `ready` resolves with the program once
 * it answers (it may run on another port than `port` after a port race: read
 * launched.program.port) and rejects with the StepFailure that says why it
 * never did, with the fork watchdog's failure when it forked without limit,
 * or with signal.reason when the caller aborted. `forkBomb` resolves with the
 * watchdog's StepFailure if it ever trips (the program is then already
 * killed). Call stop() in every case.
 *
 * @param {object} o
 * @param {string} o.file absolute path of the learner's program
 * @param {object} o.verifier the lesson's verifier (its env, bootEnv, clustered, probeAddresses)
 * @param {string[]} [o.packages] the packages the lesson lets the program import (its manifest entry's)
 * @param {object} [o.env] variables to start it with (default: lessonEnvOf(verifier))
 * @param {number} [o.port] the port of the first try (default: a free one)
 * @param {(stream: string, line: string) => void} [o.onLine] each line the program prints
 * @param {(message: string) => void} [o.log] what the launch does ($ command, port retries, ready)
 * @param {AbortSignal} [o.signal] aborting it ends the wait for readiness
 * @param {number} [o.readyTimeoutMs]
 */
export function launch({ file, verifier, packages = [], env = lessonEnvOf(verifier), port, onLine = () => {}, log = () => {}, signal, readyTimeoutMs = 15000 }) {
  const ctx = new StepContext({
    file,
    lessonEnv: env,
    reporter: { stepLog: log, programLine: onLine, note: log },
    store: memoryStore(),
    readyTimeoutMs,
    verifier,
    packages,
  });
  const tripped = new AbortController();
  ctx.signal = signal ? AbortSignal.any([signal, tripped.signal]) : tripped.signal;
  let onForkBomb;
  const forkBomb = new Promise((resolve) => (onForkBomb = resolve));
  const stopWatch = watchForks(ctx, (failure) => {
    tripped.abort(failure);
    onForkBomb(failure);
  });
  const ready = ctx.start({}, { port });
  ready.catch(() => {}); // the caller awaits it; a rejection after stop() is no news
  return {
    ctx,
    ready,
    forkBomb,
    get program() {
      return ctx.program;
    },
    async stop() {
      stopWatch();
      await ctx.stopProgram();
    },
  };
}
