// Runs one verifier: the boot step, then the lesson's steps in order, each
// under its own timeout, stopping at the first failure. It owns teardown
// (always), the fork watchdog, interruption, and the report. Verifiers only
// describe steps; they never exit the process or clean up.
import { StepContext, memoryStore } from './context.js';
import { StepFailure, formatFailure } from './failure.js';
import { reapOrphans } from './program.js';
import { watchForks } from './watchdog.js';

const DEFAULT_STEP_TIMEOUT_MS = 10000;
// How long an aborted step may go on to settle before the teardown (its waits end on ctx.signal).
const ABANDONED_STEP_GRACE_MS = 2000;

const SILENT = { begin() {}, note() {}, stepStart() {}, stepLog() {}, programLine() {}, stepEnd() {}, end() {} };

export class Interrupted extends Error {
  constructor(signal) {
    super(`verify was interrupted (${signal})`);
    this.name = 'Interrupted';
    this.signal = signal;
  }
}

/** The first step of every verifier: start the program and check GET /. */
export const bootStep = {
  id: 'starts',
  title: 'starts and answers GET / with its pid',
  async run(ctx) {
    await ctx.start(ctx.verifier.bootEnv ?? {});
    // Checks the GET / answer that proved readiness instead of sending another
    // request: a program that answers only some requests (sticky sessions
    // without pauseOnConnect) then fails in the lesson step that says why.
    const r = ctx.expectJson(ctx.readyAnswer);
    ctx.log(`GET / -> ${r.text}`);
  },
};

/**
 * @param {object} o
 * @param {{ id: string, packages?: string[] }} o.lesson its manifest entry: packages are those its programs may import
 * @param {string} o.file absolute path
 * @param {{ env?: object, steps: object[], clustered?: boolean, bootEnv?: object }} o.verifier
 * @param {object} [o.reporter] how the run is shown (lib/cli/reporter.js has the CLI's): begin, note, stepStart, stepLog, programLine, stepEnd, end; silent by default
 * @param {{ get(k): any, set(k, v): void }} [o.store]
 * @param {AbortSignal} [o.signal] aborting it interrupts the run (with the signal name as reason)
 * @param {number} [o.readyTimeoutMs]
 * @param {object} [o.options] run options from the command line that a verifier may read as ctx.options (capstone: { seed })
 * @returns {Promise<{ lesson, file, passed, durationMs, steps, interrupted? }>}
 */
export async function runVerifier({ lesson, file, verifier, reporter = SILENT, store = memoryStore(), signal, readyTimeoutMs = 15000, options = {} }) {
  const started = performance.now();
  const reaped = reapOrphans();
  const ctx = new StepContext({ file, lessonEnv: verifier.env ?? {}, reporter, store, readyTimeoutMs, verifier, options, packages: lesson.packages ?? [] });
  // verifier.before: steps that must hold before the program can start (a
  // Redis that answers, client addresses that can be bound).
  const steps = [...(verifier.before ?? []), { ...bootStep, timeoutMs: readyTimeoutMs + 8000 }, ...verifier.steps];
  const report = { lesson: lesson.id, file, passed: false, durationMs: 0, steps: [] };

  reporter.begin({ lesson, file, steps });
  if (reaped.length) reporter.note(`ended ${reaped.length} process(es) left by an earlier verify that was killed`);

  let stopWatchdog;
  let current; // the AbortController of the running step
  const onExternalAbort = () => current?.abort(new Interrupted(signal.reason ?? 'SIGINT'));
  signal?.addEventListener('abort', onExternalAbort, { once: true });
  try {
    stopWatchdog = watchForks(ctx, (failure) => current?.abort(failure));

    for (const [index, step] of steps.entries()) {
      if (signal?.aborted) break;
      current = new AbortController();
      ctx.signal = current.signal;
      reporter.stepStart(step, index, steps.length);
      const stepStarted = performance.now();
      const outcome = await runStep(step, ctx, current);
      const durationMs = Math.round(performance.now() - stepStarted);
      const entry = { id: step.id, name: step.title, passed: outcome.passed, durationMs, detail: '', ...ctx.takeAttachments() };
      if (!outcome.passed) {
        const failure = outcome.failure;
        if (failure.showOutput && !failure.outputLines && ctx.program) {
          await ctx.program.outputSettled();
          failure.outputLines = ctx.program.telltaleLines();
        }
        entry.detail = failure instanceof Interrupted ? failure.message : formatFailure(failure, { commandLine: ctx.program?.commandLine(), primaryPid: ctx.program?.pid });
      }
      report.steps.push(entry);
      reporter.stepEnd(entry, outcome.failure);
      if (!outcome.passed) {
        if (outcome.failure instanceof Interrupted) report.interrupted = outcome.failure.signal;
        break;
      }
    }
    report.passed = report.steps.length === steps.length && report.steps.every((s) => s.passed);
  } finally {
    stopWatchdog?.();
    signal?.removeEventListener('abort', onExternalAbort);
    for (const fn of ctx.teardowns.splice(0)) fn();
    await ctx.stopProgram();
    // verifier.teardown: undo what the steps left outside the program (keys in Redis), whatever the verdict.
    if (verifier.teardown) {
      try {
        await verifier.teardown(ctx);
      } catch (err) {
        reporter.note(`cleanup after the run failed: ${err?.message ?? err}`);
      }
    }
    report.durationMs = Math.round(performance.now() - started);
  }
  reporter.end(report);
  return report;
}

async function runStep(step, ctx, controller) {
  const timeoutMs = step.timeoutMs ?? DEFAULT_STEP_TIMEOUT_MS;
  const timer = setTimeout(
    () =>
      controller.abort(
        new StepFailure(`This step did not finish within ${timeoutMs / 1000} s.`, {
          explanation: 'The verifier waited for your program and it never did what the step needs (a request that hangs, a worker that never comes back).',
          showOutput: true,
        }),
      ),
    timeoutMs,
  );
  const aborted = new Promise((_, reject) => {
    controller.signal.addEventListener('abort', () => reject(controller.signal.reason), { once: true });
  });
  const running = Promise.resolve().then(() => step.run(ctx));
  running.catch(() => {}); // after a timeout the step may still reject; that is already reported
  try {
    await Promise.race([running, aborted]);
    return { passed: true };
  } catch (err) {
    // An interrupted or timed-out step still runs: let it finish what it was
    // opening (a Redis client it is about to keep in ctx.data) before the
    // teardown, or what it opens after would keep the verifier alive.
    if (controller.signal.aborted) await settledWithin(running, ABANDONED_STEP_GRACE_MS);
    const reason = controller.signal.aborted ? controller.signal.reason : err;
    if (reason instanceof StepFailure || reason instanceof Interrupted) return { passed: false, failure: reason };
    return {
      passed: false,
      failure: new StepFailure('The verifier itself hit an error (not your fault). Please report it with this output.', {
        explanation: reason?.stack ?? String(reason),
      }),
    };
  } finally {
    clearTimeout(timer);
    // Whatever the step left running in the background (load, probes) stops with it.
    if (!controller.signal.aborted) controller.abort(new Error('step ended'));
  }
}

/** Resolves once the promise settles, or after ms, whichever comes first. */
function settledWithin(promise, ms) {
  let timer;
  return Promise.race([promise.then(() => {}, () => {}), new Promise((resolve) => (timer = setTimeout(resolve, ms)))]).finally(() => clearTimeout(timer));
}

export { memoryStore };
