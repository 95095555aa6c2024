// Checks shared by the verifiers of several lessons.
import { request } from '../../lib/harness/http.js';

/**
 * Waits (bounded) for exactly n workers and fails with the count found,
 * "found 1 worker, WORKERS=3", and the hint that fits.
 */
export async function countWorkers(ctx, n, { none, noneHint, wrongHint, context = `WORKERS=${n}`, timeoutMs = 3000 } = {}) {
  const r = await ctx.waitForWorkers(n, { timeoutMs });
  if (r.ok) {
    ctx.log(`${n} workers: ${r.value.join(', ')} (primary ${ctx.primaryPid})`);
    return r.value;
  }
  const found = r.value.length;
  if (found === 0) {
    const probe = await ctx.request('/', { timeoutMs: 2000 });
    if (probe.pid !== undefined && probe.pid === ctx.primaryPid) {
      ctx.fail('The primary answers requests itself and has no workers.', {
        expected: `${n} workers (${context}) that serve; a primary that only forks`,
        actual: `no worker processes; GET / answered by the primary (pid ${ctx.primaryPid})`,
        explanation:
          'The server code runs in the primary. Either there is no if (cluster.isPrimary) branch around the forking and the server, or app.listen sits outside the worker branch; workers that start then die (their error is below).',
        hint: 'if (cluster.isPrimary) { fork } else { express app and app.listen }',
        reproduce: ctx.curl('/'),
        outputLines: ctx.program.telltaleLines(),
      });
    }
  }
  if (found === 0 && none) {
    ctx.fail(none, {
      expected: `${n} workers (${context})`,
      actual: 'the primary forked none',
      explanation: 'Your program runs as one process: it serves requests, but nothing is clustered.',
      hint: noneHint,
      showOutput: true,
    });
  }
  ctx.fail(`Found ${found} worker${found === 1 ? '' : 's'}, ${context}.`, {
    expected: `exactly ${n} workers`,
    actual: `${found}: ${r.value.join(', ')}`,
    reproduce: `pgrep -P ${ctx.primaryPid}   # the primary's children`,
    hint: wrongHint,
    showOutput: true,
  });
}

/** Fails when the primary has exited: everything after depends on it. */
export function expectPrimaryAlive(ctx, when) {
  const program = ctx.program;
  if (program.exited) {
    const { code, signal } = program.exit;
    ctx.fail(`The primary exited ${when}.`, {
      expected: `the primary (pid ${program.pid}) keeps running and manages its workers`,
      actual: signal ? `killed by ${signal}` : `exited with code ${code}`,
      explanation: 'When the primary dies, its workers go with it and the port closes. Usually an error in an event handler of the primary ends it.',
      outputLines: program.telltaleLines(),
    });
  }
}

/**
 * Waits until `dead` pids are gone and exactly n workers are alive, none of
 * them dead ones, then returns the new pids. Fails with what the process
 * table showed: too few (no replacement), too many (more than one per death).
 */
export async function waitForReplacement(ctx, n, dead, { timeoutMs = 2000, what = 'the replacement', before = dead, neverCame } = {}) {
  const r = await ctx.waitForWorkers(n, { timeoutMs, accept: (pids) => dead.every((d) => !pids.includes(d)) });
  if (r.ok) {
    const fresh = r.value.filter((p) => !before.includes(p) && !dead.includes(p));
    // Later steps send traffic: wait (bounded) until the replacements listen.
    const silent = await ctx.waitAllAnswering({ timeoutMs: 5000 });
    if (silent.length) {
      ctx.fail(`The replacement worker ${silent.join(', ')} runs but never answered.`, {
        expected: 'a replacement that listens on PORT like the first workers',
        actual: `no request reached ${silent.join(', ')} within 5 s`,
        hint: 'the replacement runs the same worker code: cluster.fork() with no special arguments.',
        showOutput: true,
      });
    }
    // A replacement that throws at start-up can be caught alive between two
    // deaths of a crash loop: it must still be there once the others answered.
    const now = ctx.workers();
    const died = fresh.filter((pid) => !now.includes(pid));
    if (died.length) failReplacementsDying(ctx, died);
    // Two forks per death can both land after the count first read n (a
    // process only shows as a worker once it runs node).
    if (now.length > n) failTooMany(ctx, n, now);
    return fresh;
  }
  expectPrimaryAlive(ctx, `while ${dead.length > 1 ? 'workers were' : 'a worker was'} being replaced`);
  const found = r.value;
  const stillThere = dead.filter((d) => found.includes(d));
  let message;
  let hint;
  let explanation;
  if (stillThere.length) {
    message = `Worker ${stillThere.join(', ')} is still alive ${timeoutMs / 1000} s later.`;
  } else if (found.length < n) {
    message = `Only ${found.length} worker${found.length === 1 ? '' : 's'} ${timeoutMs / 1000} s after ${dead.length > 1 ? 'the workers' : 'a worker'} died: ${what} never came.`;
    // neverCame: what the caller knows of the likely causes (a crash-loop
    // protection that counted this death), instead of the plain respawn hint.
    hint = neverCame?.hint ?? "in the primary, cluster.on('exit', () => cluster.fork()) replaces every worker that dies.";
    explanation = neverCame?.explanation;
  } else {
    message = `${found.length} workers after ${dead.length > 1 ? 'the workers' : 'a worker'} died, WORKERS=${n}.`;
    // Where a second fork hides differs (a 'disconnect' handler, the line
    // after a kill, a per-worker handler): the hint names the places, not one.
    hint = "fork exactly one replacement per death, in the 'exit' event only: not also in 'disconnect', or right after the primary kills a worker.";
  }
  ctx.fail(message, {
    expected: `exactly ${n} workers, none of them ${dead.join(', ')}`,
    actual: `${found.length}: ${found.join(', ') || 'none'}`,
    reproduce: [`kill -9 ${dead[0]}`, `pgrep -P ${ctx.primaryPid}`],
    explanation,
    hint,
    showOutput: true,
  });
}

/** Fails because replacement workers die soon after they start (a crash loop). */
export function failReplacementsDying(ctx, died) {
  ctx.fail(`The replacement worker ${died.join(', ')} died soon after it started.`, {
    expected: 'a replacement that starts, listens and stays',
    actual: `${died.join(', ')} exited within moments of being forked`,
    explanation:
      'Replacement workers that die as soon as they start usually throw at start-up: the error is below. Fix it, or the primary replaces them forever (a crash loop).',
    showOutput: true,
  });
}

/** Fails because the primary forked more than one replacement per death. */
export function failTooMany(ctx, n, pids) {
  ctx.fail(`The worker count rose to ${pids.length} after the replacement.`, {
    expected: `exactly ${n} workers`,
    actual: `${pids.length} workers: ${pids.join(', ')}`,
    hint: "fork exactly one replacement per death, in one 'exit' handler only: not also in 'disconnect', in a per-worker handler, or right after the primary kills a worker.",
    showOutput: true,
  });
}

/** Fails when SIGUSR2 killed the primary (no handler): the capstone's rolling restart and its crash-loop recovery say it alike. */
export function expectSurvivedSigusr2(ctx) {
  if (ctx.program.exited && ctx.program.exit.signal === 'SIGUSR2') {
    ctx.fail('The primary died of SIGUSR2.', {
      expected: 'a rolling restart: the primary keeps running and replaces its workers one at a time',
      actual: 'killed by SIGUSR2 (the default action of a signal without a handler)',
      hint: "process.on('SIGUSR2', rollingRestart) in the primary (the rolling-restart lesson).",
    });
  }
}

/**
 * "Crash a worker and see it die" (respawn, capstone): GET /crash must end
 * the worker that takes it with an uncaught exception. Fails when it answers,
 * or when no worker of `before` is gone within 2 s. Returns the request's
 * outcome (with start and end, performance.now() values) and the dead pids.
 */
export async function crashOneWorker(ctx, before) {
  const start = performance.now();
  const r = { ...(await request(ctx.port, '/crash', { timeoutMs: 3000, signal: ctx.signal })), start, end: performance.now() };
  if (r.ok) {
    ctx.fail(`GET /crash answered (status ${r.status}) instead of ending the worker.`, {
      expected: 'no answer: the worker dies of an uncaught exception',
      actual: `status ${r.status}`,
      explanation:
        r.status === 500
          ? 'Express catches an error thrown inside a route handler and answers 500, so the worker survives. Throw where express cannot catch it: setImmediate(() => { throw new Error("crash") }).'
          : 'Add GET /crash: the worker that receives it throws an uncaught exception and dies.',
      reproduce: ctx.curl('/crash'),
    });
  }
  // Polled until a worker is gone: its connection can reset a moment before
  // the process leaves the process table.
  const gone = () => before.filter((pid) => !ctx.workers().includes(pid));
  const crashed = await ctx.poll(() => gone().length > 0 && gone(), { timeoutMs: 2000, intervalMs: 5 });
  if (!crashed.ok) {
    ctx.fail('GET /crash got no answer, but no worker died.', {
      expected: 'the worker that received it exits',
      actual: `${r.error}; all of ${before.join(', ')} still alive`,
      reproduce: ctx.curl('/crash'),
      hint: 'throw an uncaught exception: setImmediate(() => { throw new Error("crash") }).',
    });
  }
  return { result: r, died: crashed.value };
}
