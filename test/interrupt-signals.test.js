// `cluster-workshop verify` interrupted mid-run, as a learner's terminal does
// it: SIGINT (Ctrl-C), SIGTERM, SIGHUP (the terminal closed) each stop the
// learner's program, exit with 128+n, and leave no process. A SIGKILLed
// verifier cannot clean up, so the next `verify` or `run` ends what it left.
import { join } from 'node:path';
import { markedProcesses } from '../lib/harness/processes.js';
import { PACKAGE_ROOT } from '../lib/manifest.js';
import { until } from './helpers/until.js';
import { startCli } from './helpers/cli.js';

const BIN = join(PACKAGE_ROOT, 'bin', 'cluster-workshop.js');
const SOLUTION_3 = join(PACKAGE_ROOT, 'solutions', 'respawn', 'server.js');
const QUICK_FAIL = join(PACKAGE_ROOT, 'test', 'fixtures', 'harness', 'syntax-error.js');
const SILENT_CLUSTER = join(PACKAGE_ROOT, 'test', 'fixtures', 'harness', 'silent-cluster.js');
const CODES = { SIGHUP: 129, SIGINT: 130, SIGTERM: 143 };

/** Processes started by the verify (or run) whose pid is owner, from their run marker. */
const ownedBy = (owner) => markedProcesses().filter((p) => Number(p.mark.split(':')[0]) === owner);

function cli(args) {
  const run = startCli(args, { cwd: PACKAGE_ROOT, env: { NO_COLOR: '1', CLUSTER_WORKSHOP_DIR: join(PACKAGE_ROOT, 'test', '.no-such-workspace') } });
  return { child: run.child, exited: run.exited, output: () => run.out };
}

/** Starts `verify 3` on a program (the reference solution) and resolves once its primary and 3 workers run. */
async function verifyUpAndRunning(file = SOLUTION_3) {
  const run = cli(['verify', 'respawn', file]);
  await until(() => ownedBy(run.child.pid).length >= 4 || run.child.exitCode !== null, 'the learner program runs');
  expect({ exited: run.child.exitCode, output: run.output() }).toEqual({ exited: null, output: expect.any(String) });
  return run;
}

describe.each(Object.entries(CODES))('verify interrupted by %s', (signal, code) => {
  test(`stops the program, exits ${code}, and leaves no process`, async () => {
    const run = await verifyUpAndRunning();
    const program = ownedBy(run.child.pid).map((p) => p.pid);
    run.child.kill(signal);
    const exit = await run.exited;
    expect({ exit, output: run.output() }).toEqual({ exit: { code, signal: null }, output: expect.stringContaining(`Interrupted (${signal})`) });
    // Checked at once: the verifier waits until its processes are gone before it exits.
    expect(ownedBy(run.child.pid)).toEqual([]);
    expect(program.length).toBeGreaterThanOrEqual(4);
  });
});

describe('a SIGKILLed verify', () => {
  async function killedVerify() {
    // A program that prints nothing: the solution, which logs, could die of
    // EPIPE on its own once its verifier is gone, leaving nothing to reap.
    const run = await verifyUpAndRunning(SILENT_CLUSTER);
    run.child.kill('SIGKILL');
    await run.exited;
    // It could not clean up: its program is still running (it has a process group of its own).
    const orphans = ownedBy(run.child.pid);
    expect(orphans.length).toBeGreaterThanOrEqual(4);
    return { owner: run.child.pid, orphans };
  }

  test('leaves its program running, and the next verify ends it', async () => {
    const { owner } = await killedVerify();
    const next = cli(['verify', '1', QUICK_FAIL]);
    const exit = await next.exited;
    expect({ exit, output: next.output() }).toEqual({ exit: { code: 1, signal: null }, output: expect.stringMatching(/ended \d+ process\(es\) left by an earlier verify/) });
    await until(() => ownedBy(owner).length === 0, 'the orphans are gone', 3000);
    expect(ownedBy(next.child.pid)).toEqual([]);
  });

  test('leaves its program running, and the next run ends it', async () => {
    const { owner } = await killedVerify();
    const next = cli(['run', '1', join(PACKAGE_ROOT, 'solutions', 'bottleneck', 'server.js')]);
    await until(() => ownedBy(next.child.pid).length >= 1 || next.child.exitCode !== null, 'run starts the program');
    await until(() => ownedBy(owner).length === 0, 'the orphans are gone', 3000);
    next.child.kill('SIGINT');
    const exit = await next.exited;
    // Ctrl-C is how a learner ends `run`: it exits by itself (0, or 130), never killed by the signal.
    expect({ signal: exit.signal, output: next.output() }).toEqual({ signal: null, output: expect.any(String) });
    expect([0, 130]).toContain(exit.code);
    expect(ownedBy(next.child.pid)).toEqual([]);
  });
});
