// `cluster-workshop verify process-manager` leaves no PM2 behind: not the
// pm2-runtime it starts (PM2's daemon in the foreground), not a
// ProcessContainer, not an instance, after a pass, after a fail (one that
// fails while the verifier holds PM2 paused with SIGSTOP), and after a SIGINT
// to the verifier at that same moment. Run through the real CLI, from a
// temporary workspace with PM2 installed, as a learner's (test/helpers/pm2.js).
import { readFileSync, readlinkSync } from 'node:fs';
import { join } from 'node:path';
import { listProcesses, markedProcesses } from '../lib/harness/processes.js';
import { PACKAGE_ROOT } from '../lib/manifest.js';
import { runCli, startCli, tempDir, removeDir } from './helpers/cli.js';
import { FixturePrograms } from './helpers/fixtures.js';
import { copyIntoPm2Workspace } from './helpers/pm2.js';
import { until } from './helpers/until.js';

const SOLUTION = join(PACKAGE_ROOT, 'solutions', 'process-manager');
// Fails at sigint-leaves, the step that pauses PM2 (SIGSTOP) and sends an instance SIGINT itself.
const CLOSE_AND_EXIT = join(PACKAGE_ROOT, 'test', 'fixtures', 'process-manager', 'close-and-exit', 'server.js');
const PM2_LIKE = /PM2 v|ProcessContainer|pm2-runtime/;
const ENV = { NO_COLOR: '1', CLUSTER_WORKSHOP_DIR: join(PACKAGE_ROOT, 'test', '.no-such-workspace') };

const cmdline = (pid) => {
  try {
    return readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0').join(' ').trim();
  } catch {
    return '';
  }
};
const cwdOf = (pid) => {
  try {
    return readlinkSync(`/proc/${pid}/cwd`);
  } catch {
    return '';
  }
};

/**
 * The processes of one verify run: started by the CLI whose pid is `owner`
 * (the harness's run marker), or run from `workspace` (PM2 starts its
 * instances in the folder of the ecosystem file, with an environment of its
 * making), or a PM2 process (pm2-runtime, "PM2 vX: God Daemon",
 * ProcessContainer) whose PM2 is the workspace's.
 */
function processesOf(owner, workspace) {
  const marked = new Set(markedProcesses().filter((p) => Number(p.mark.split(':')[0]) === owner).map((p) => p.pid));
  return listProcesses()
    .filter((p) => p.pid !== process.pid)
    .map((p) => ({ pid: p.pid, state: p.state, cmd: cmdline(p.pid), cwd: cwdOf(p.pid), marked: marked.has(p.pid) }))
    .filter((p) => p.marked || p.cwd.startsWith(workspace) || (PM2_LIKE.test(p.cmd) && p.cmd.includes(workspace)));
}

let workspaces = [];
const programs = new FixturePrograms();
afterAll(() => {
  programs.cleanup();
  workspaces.splice(0).forEach(removeDir);
});

function solutionInWorkspace() {
  const root = tempDir('cw-pm-teardown-');
  workspaces.push(root);
  return copyIntoPm2Workspace(SOLUTION, 'process-manager', root);
}

test('a verify that passes leaves no PM2 process and no instance', async () => {
  const file = solutionInWorkspace();
  const r = await runCli(['verify', 'process-manager', file], { cwd: PACKAGE_ROOT, env: ENV, timeoutMs: 240000 });
  expect({ code: r.code, out: r.code === 0 ? '' : r.out }).toEqual({ code: 0, out: '' });
  // Checked at once: the verifier waits until its processes are gone before it exits.
  expect(processesOf(r.pid, workspaces.at(-1))).toEqual([]);
}, 300000);

test('a verify that fails while PM2 is paused (close-and-exit, at sigint-leaves) leaves no PM2 process and no instance', async () => {
  const file = programs.programOf(CLOSE_AND_EXIT);
  const workspace = join(file, '..', '..');
  const r = await runCli(['verify', 'process-manager', file], { cwd: PACKAGE_ROOT, env: ENV, timeoutMs: 180000 });
  expect({ code: r.code, failedAtSigintLeaves: r.out.includes('[sigint-leaves] ✗ failed') }).toEqual({ code: 1, failedAtSigintLeaves: true });
  expect(processesOf(r.pid, workspace)).toEqual([]);
}, 240000);

test('SIGINT to verify while it holds PM2 paused ends PM2 and every instance', async () => {
  const file = solutionInWorkspace();
  const workspace = workspaces.at(-1);
  const run = startCli(['verify', 'process-manager', file], { cwd: PACKAGE_ROOT, env: ENV });
  // The moment the sigint-leaves step has stopped PM2 (state T): a teardown
  // that only signalled the group would leave a stopped PM2 behind.
  const paused = await until(
    () => {
      if (run.child.exitCode !== null) throw new Error(`verify ended before PM2 was paused:\n${run.out}`);
      return processesOf(run.pid, workspace).find((p) => /pm2-runtime/.test(p.cmd) && p.state === 'T');
    },
    () => `pm2-runtime paused by the sigint-leaves step; output so far:\n${run.out}`,
    200000,
  );
  const seen = processesOf(run.pid, workspace);
  run.child.kill('SIGINT');
  const exit = await run.exited;
  expect({ exit, out: run.out }).toEqual({ exit: { code: 130, signal: null }, out: expect.stringContaining('Interrupted (SIGINT)') });
  expect(processesOf(run.pid, workspace)).toEqual([]);
  // Not vacuous: PM2 and its instances were there, seen as this run's.
  expect(paused.pid).toBeGreaterThan(0);
  expect(seen.filter((p) => p.pid !== paused.pid && /server\.js|ProcessContainer/.test(p.cmd)).length).toBeGreaterThanOrEqual(2);
}, 300000);
