// The harness on hostile programs, without any lesson: a syntax error, a
// program that exits at once, one that never listens, one on another port,
// one busy forever, one that ignores SIGTERM, one that forks without limit.
// Each gets a clear verdict at the right moment (an exit is reported when it
// happens, not at the readiness deadline; a silent program at the deadline,
// not at the step timeout) and leaves no process behind, which is checked in
// the process table both by the run's marker and by command line.
import { copyFileSync, mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runVerifier } from '../lib/harness/runner.js';
import { TextReporter } from '../lib/cli/reporter.js';
import { isAlive } from '../lib/harness/processes.js';
import { leftovers, verdictOf, PASSED } from './helpers/verify.js';

const PROGRAMS = new URL('./fixtures/harness/', import.meta.url).pathname;
const READY_MS = 4000;
// For programs that exit: a deadline so long that a verdict before it can only
// come from noticing the exit, however loaded the machine.
const LONG_READY_MS = 30000;
// The boot step's own timeout is the readiness deadline + 8 s (runner.js): a
// verdict after READY_MS + this margin would come from the step timeout, not
// from the readiness check, and say less.
const MARGIN_MS = 6000;
const lesson = { id: 'harness', number: 0, title: 'harness test' };
// Each program runs from a copy in a folder of this test file's own: the
// Node-version pieces of npm test run this file beside the main piece, and
// runningFile (which finds processes by the file in their command line)
// counted the other piece's syntax-error.js as left behind by this one.
const OWN = mkdtempSync(join(tmpdir(), 'cw-harness-verdicts-'));
afterAll(() => rmSync(OWN, { recursive: true, force: true }));

async function verify(name, { verifier = { clustered: false, steps: [] }, readyTimeoutMs = READY_MS, signal } = {}) {
  const file = join(OWN, name);
  copyFileSync(join(PROGRAMS, name), file);
  let log = '';
  const reporter = new TextReporter({ write: (s) => (log += s) });
  const report = await runVerifier({ lesson, file, verifier, reporter, readyTimeoutMs, signal });
  const failed = report.steps.find((s) => !s.passed);
  return { report, log, failed, file };
}

/** Live processes whose command line names the file: found without the run's marker. */
function runningFile(file) {
  const out = [];
  for (const pid of readdirSync('/proc').filter((n) => /^\d+$/.test(n))) {
    try {
      const cmd = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      const state = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1][0];
      if (cmd.includes(file) && state !== 'Z') out.push(Number(pid));
    } catch {
      // gone while we looked
    }
  }
  return out;
}

function expectNothingLeft(file) {
  expect(leftovers()).toEqual([]);
  expect(runningFile(file)).toEqual([]);
}

test('a syntax error is reported when node exits, with the SyntaxError and its line', async () => {
  const { report, failed, file } = await verify('syntax-error.js', { readyTimeoutMs: LONG_READY_MS });
  expect(failed.id).toBe('starts');
  expect(failed.detail).toContain('exited with code 1');
  expect(failed.detail).toContain('SyntaxError');
  expect(failed.detail).toContain('syntax-error.js:4');
  // It did not wait for the readiness deadline: the exit itself is the verdict.
  expect(report.durationMs).toBeLessThan(LONG_READY_MS);
  expectNothingLeft(file);
});

test('a program that exits at once is reported as such, not as a timeout', async () => {
  const { report, failed, file } = await verify('exits-at-once.js', { readyTimeoutMs: LONG_READY_MS });
  expect(failed.id).toBe('starts');
  expect(failed.detail).toContain('exited with code 0');
  expect(failed.detail).toContain('app.listen(process.env.PORT)');
  expect(failed.detail).toContain('nothing to do');
  expect(report.durationMs).toBeLessThan(LONG_READY_MS);
  expectNothingLeft(file);
});

test('a program that never listens fails at the readiness deadline, saying it listens on no port', async () => {
  const { report, failed, file } = await verify('never-listens.js');
  expect(failed.id).toBe('starts');
  expect(failed.detail).toContain(`within ${READY_MS / 1000} s`);
  expect(failed.detail).toContain('listens on no port');
  // A slow start gets the whole deadline; the verdict comes from it, not from the step timeout.
  expect(report.durationMs).toBeGreaterThanOrEqual(READY_MS);
  expect(report.durationMs).toBeLessThan(READY_MS + MARGIN_MS);
  expectNothingLeft(file);
});

test('a program on another port is told which port it listens on instead, once it settles there, not at the readiness deadline', async () => {
  // A deadline so long that the verdict can only come from the sockets the
  // program holds, not from "nothing answered within" the deadline.
  const { report, failed, log, file } = await verify('other-port.js', { readyTimeoutMs: LONG_READY_MS });
  const port = /listening on port (\d+)/.exec(log)?.[1];
  expect(port).toBeDefined();
  expect(failed.id).toBe('starts');
  expect(failed.detail).toContain(`Your program listens on port ${port}, not on the PORT it was given`);
  expect(failed.detail).toContain(`It listens on port ${port} instead`);
  expect(failed.detail).not.toContain('Nothing answered');
  expect(report.durationMs).toBeLessThan(LONG_READY_MS);
  expectNothingLeft(file);
});

test('a program busy forever at start-up is told it is busy, from its CPU use', async () => {
  const { report, failed, file } = await verify('busy-forever.js');
  expect(failed.id).toBe('starts');
  expect(failed.detail).toContain('it is busy');
  expect(failed.detail).not.toContain('listens on no port');
  expect(report.durationMs).toBeLessThan(READY_MS + MARGIN_MS);
  expectNothingLeft(file);
});

test('a cluster that ignores SIGTERM passes and is still stopped, primary and workers', async () => {
  const seen = [];
  const verifier = {
    env: { WORKERS: '2' },
    steps: [
      {
        id: 'record',
        title: 'records the processes of the run',
        async run(ctx) {
          const workers = await ctx.waitForWorkers(2, { timeoutMs: 3000 });
          if (!workers.ok) ctx.fail('expected 2 workers');
          seen.push(...ctx.program.processes().map((p) => p.pid));
        },
      },
    ],
  };
  const { report, log, file } = await verify('ignores-sigterm.js', { verifier });
  expect(verdictOf({ report, log })).toMatch(PASSED);
  expect(seen.length).toBe(3);
  // SIGTERM was sent and ignored (the program says so), then SIGKILL ended every process.
  expect(seen.filter((pid) => isAlive(pid))).toEqual([]);
  expectNothingLeft(file);
});

test('a program that forks without limit is stopped by the watchdog long before any deadline', async () => {
  const { report, failed, file } = await verify('fork-bomb.js', { readyTimeoutMs: LONG_READY_MS });
  expect(failed.id).toBe('starts');
  expect(failed.detail).toMatch(/started \d+ processes and kept going/);
  expect(report.durationMs).toBeLessThan(LONG_READY_MS);
  expectNothingLeft(file);
});

test('three sets of workers at once (two rolling restarts side by side) are not taken for forking without limit', async () => {
  const WORKERS = 3;
  const verifier = {
    env: { WORKERS: String(WORKERS) },
    steps: [
      {
        id: 'all-up',
        title: 'every worker is up, and stays up over several watchdog rounds',
        async run(ctx) {
          const up = await ctx.waitForWorkers(3 * WORKERS, { timeoutMs: 10000 });
          if (!up.ok) ctx.fail(`found ${up.value.length} workers`);
          // Absence is what is checked here: the watchdog (every 200 ms) gets
          // five chances to stop the program, and must not.
          await ctx.poll(() => ctx.program.exited, { timeoutMs: 1000, intervalMs: 50 });
          if (ctx.program.exited) ctx.fail('the program was stopped');
        },
      },
    ],
  };
  // Nine workers start at once: on a loaded machine (the test lanes beside
  // it) they took over READY_MS to answer, and the test failed at starts,
  // before the watchdog it is about could be judged.
  const { report, file } = await verify('three-sets.js', { verifier, readyTimeoutMs: LONG_READY_MS });
  expect(verdictOf({ report, log: '' })).toMatch(PASSED);
  expectNothingLeft(file);
});

test('a detached, double-forked helper of the program does not survive the run', async () => {
  const verifier = {
    clustered: false,
    steps: [
      {
        id: 'helper-up',
        title: 'the helper has started',
        async run(ctx) {
          const up = await ctx.poll(() => ctx.program.tail.some((l) => l.startsWith('helper pid')), { timeoutMs: 5000 });
          if (!up.ok) ctx.fail('the helper never started');
        },
      },
    ],
  };
  const { report, log, file } = await verify('detached-helper.js', { verifier });
  expect(verdictOf({ report, log })).toMatch(PASSED);
  const helper = Number(/helper pid (\d+)/.exec(log)?.[1]);
  expect(helper).toBeGreaterThan(0);
  expect(isAlive(helper)).toBe(false);
  expectNothingLeft(file);
});

test('aborting a run mid-step stops the program and reports the interruption', async () => {
  const controller = new AbortController();
  const verifier = {
    clustered: false,
    steps: [
      {
        id: 'waits',
        title: 'waits until aborted',
        timeoutMs: 60000,
        async run(ctx) {
          setImmediate(() => controller.abort('SIGINT'));
          await ctx.poll(() => false, { timeoutMs: 60000 });
        },
      },
    ],
  };
  const { report, file } = await verify('detached-helper.js', { verifier, signal: controller.signal });
  expect(report.interrupted).toBe('SIGINT');
  expect(report.passed).toBe(false);
  expect(report.durationMs).toBeLessThan(10000);
  expectNothingLeft(file);
});
