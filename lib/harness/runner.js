// Runs one verifier: the boot step, then the lesson's steps in order, each
// under its own timeout, stopping at the first failure. It owns teardown
// (always), the fork watchdog, interruption, and the report. Verifiers only
// describe steps; they never exit the process or clean up.
import { StepContext } from './context.js';
import { StepFailure, formatFailure } from './failure.js';
import { reapOrphans } from './program.js';

const DEFAULT_STEP_TIMEOUT_MS = 10000;
const WATCHDOG_MS = 200;
// How many processes a program may have before it counts as forking without
// limit: the primary, three sets of workers (a rolling restart has old and
// new workers side by side, and a program that runs two restarts at once
// briefly has three sets, a bounded mistake with its own message), and a few
// helpers. Forking without limit outgrows any such bound within moments.
const WORKER_SETS = 3;
const EXTRA_PROCESSES = 4;

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
 * @param {{ id: string }} o.lesson
 * @param {string} o.file absolute path
 * @param {{ env?: object, steps: object[], clustered?: boolean, bootEnv?: object }} o.verifier
 * @param {object} o.reporter see reporter.js
 * @param {{ get(k): any, set(k, v): void }} [o.store]
 * @param {AbortSignal} [o.signal] aborting it interrupts the run (with the signal name as reason)
 * @param {number} [o.readyTimeoutMs]
 * @param {object} [o.options] run options from the command line that a verifier may read as ctx.options (capstone: { seed })
 * @returns {Promise<{ lesson, file, passed, durationMs, steps, interrupted? }>}
 */
export async function runVerifier({ lesson, file, verifier, reporter, store = memoryStore(), signal, readyTimeoutMs = 15000, options = {} }) {
  const started = performance.now();
  const reaped = reapOrphans();
  const ctx = new StepContext({ file, lessonEnv: verifier.env ?? {}, reporter, store, readyTimeoutMs, verifier, options });
  // verifier.before: steps that must hold before the program can start (a
  // Redis that answers, client addresses that can be bound).
  const steps = [...(verifier.before ?? []), { ...bootStep, timeoutMs: readyTimeoutMs + 8000 }, ...verifier.steps];
  const report = { lesson: lesson.id, file, passed: false, durationMs: 0, steps: [] };

  reporter.begin({ lesson, file, steps });
  if (reaped.length) reporter.note(`ended ${reaped.length} process(es) left by an earlier verify that was killed`);

  let watchdog;
  let current; // the AbortController of the running step
  const onExternalAbort = () => current?.abort(new Interrupted(signal.reason ?? 'SIGINT'));
  signal?.addEventListener('abort', onExternalAbort, { once: true });
  try {
    watchdog = setInterval(() => {
      const program = ctx.program;
      if (!program || program.exited) return;
      const limit = 1 + WORKER_SETS * ctx.expectedWorkers + EXTRA_PROCESSES;
      const count = program.processes({ includeMarked: false }).length;
      if (count > limit) {
        program.killNow();
        current?.abort(forkedWithoutLimit(count, ctx));
      }
    }, WATCHDOG_MS);

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
        entry.detail = failure instanceof Interrupted ? failure.message : formatFailure(failure, { commandLine: ctx.program?.commandLine() });
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
    clearInterval(watchdog);
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

function forkedWithoutLimit(count, ctx) {
  return new StepFailure(`Your program started ${count} processes and kept going, so the verifier stopped it.`, {
    expected: `the primary and ${ctx.expectedWorkers} workers`,
    actual: `${count} processes`,
    explanation:
      'Forking without limit usually means the code that forks also runs in the workers (no cluster.isPrimary check), or an exit handler forks several replacements per death.',
    hint: 'fork only in the primary: if (cluster.isPrimary) { ...fork WORKERS times... } else { ...listen... }',
    outputLines: ctx.program?.lastLines(8),
  });
}

export function memoryStore() {
  const values = new Map();
  return { get: (k) => values.get(k), set: (k, v) => values.set(k, v) };
}
