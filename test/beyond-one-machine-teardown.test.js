// The beyond-one-machine verifier runs two learner programs, a real nginx
// and a Redis client of its own: after a pass, a failure in the middle (both
// machines and nginx running), Ctrl-C, and a SIGKILL of the verifier (the
// next verify ends what it left), none of them is left: no marked process,
// no nginx process (its workers carry no mark: they are found as nginx
// processes that were not there before), no verifier connection to Redis,
// no temporary nginx folder.
import { readFileSync, readdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { listProcesses, markedProcesses } from '../lib/harness/processes.js';
import { PACKAGE_ROOT } from '../lib/manifest.js';
import { verifierConnectionName } from '../verify/shared/redis.js';
import { FixturePrograms } from './helpers/fixtures.js';
import { verifyFile, verdictOf, PASSED, failedAt } from './helpers/verify.js';
import { startCli } from './helpers/cli.js';
import { until } from './helpers/until.js';

const SOLUTION = join(PACKAGE_ROOT, 'solutions', 'beyond-one-machine', 'server.js');
const FIXTURES = join(PACKAGE_ROOT, 'test', 'fixtures', 'beyond-one-machine');
const QUICK_FAIL = join(PACKAGE_ROOT, 'test', 'fixtures', 'harness', 'syntax-error.js');
const programs = new FixturePrograms();
afterAll(() => programs.cleanup());

/**
 * nginx processes of verifier runs: their group's leader (nginx's master)
 * runs from a cw-nginx- folder, or is gone (workers left behind). nginx
 * processes of anyone else on this machine (a learner's own nginx, with a
 * live master elsewhere) are not ours.
 */
function nginxPids() {
  const procs = listProcesses();
  const ours = (p) => {
    const leader = procs.find((q) => q.pid === p.pgid);
    if (!leader) return true;
    try {
      return readFileSync(`/proc/${leader.pid}/cmdline`, 'utf8').includes(join(tmpdir(), 'cw-nginx-'));
    } catch {
      return true;
    }
  };
  return new Set(procs.filter((p) => p.comm === 'nginx' && ours(p)).map((p) => p.pid));
}
const nginxFolders = () => new Set(readdirSync(tmpdir()).filter((n) => n.startsWith('cw-nginx-')));
const ownedBy = (owner) => markedProcesses().filter((p) => Number(p.mark.split(':')[0]) === owner);

/** What exists before a run, to compare with what is left after it. */
function snapshot() {
  return { nginx: nginxPids(), folders: nginxFolders() };
}

/** nginx processes and folders that appeared since `before` and are still there. */
function leftSince(before) {
  return {
    nginx: [...nginxPids()].filter((pid) => !before.nginx.has(pid)),
    folders: [...nginxFolders()].filter((n) => !before.folders.has(n)),
  };
}

/** The Redis connections of the verifier that ran in process `pid` (by their name). */
async function verifierConnections(pid) {
  const redis = new Redis(process.env.REDIS_URL || 'redis://127.0.0.1:6379', { lazyConnect: true, maxRetriesPerRequest: 0 });
  await redis.connect();
  try {
    const list = await redis.client('LIST');
    return list.split('\n').filter((l) => l.includes(`name=${verifierConnectionName(pid)} `));
  } finally {
    redis.disconnect();
  }
}

test('a passing run leaves nothing: no machine, no nginx, no Redis connection, no folder', async () => {
  const before = snapshot();
  const result = await verifyFile('beyond-one-machine', SOLUTION);
  expect(verdictOf(result)).toMatch(PASSED);
  expect(ownedBy(process.pid)).toEqual([]);
  expect(leftSince(before)).toEqual({ nginx: [], folders: [] });
  expect(await verifierConnections(process.pid)).toEqual([]);
});

test('a run that fails while both machines and nginx run leaves nothing', async () => {
  const before = snapshot();
  const result = await verifyFile('beyond-one-machine', programs.programOf(join(FIXTURES, 'sessions-in-memory.js')));
  expect(verdictOf(result)).toMatch(failedAt('session-both-machines'));
  expect(ownedBy(process.pid)).toEqual([]);
  expect(leftSince(before)).toEqual({ nginx: [], folders: [] });
  expect(await verifierConnections(process.pid)).toEqual([]);
});

function cli(args) {
  return startCli(args, { cwd: PACKAGE_ROOT, env: { NO_COLOR: '1', CLUSTER_WORKSHOP_DIR: join(PACKAGE_ROOT, 'test', '.no-such-workspace') } });
}

/** `verify beyond-one-machine` on the solution, once its nginx (a marked process) runs in front of the machines. */
async function verifyWithNginxRunning() {
  const run = cli(['verify', 'beyond-one-machine', SOLUTION]);
  await until(() => /\[reaches-both\]/.test(run.out) || run.child.exitCode !== null, 'nginx runs in front of both machines', 60000);
  expect({ exited: run.child.exitCode, nginx: ownedBy(run.child.pid).some((p) => p.comm === 'nginx') }).toEqual({ exited: null, nginx: true });
  return run;
}

test('Ctrl-C in the middle: the verify exits 130 and leaves nothing', async () => {
  const before = snapshot();
  const run = await verifyWithNginxRunning();
  run.child.kill('SIGINT');
  const exit = await run.exited;
  expect({ exit, interrupted: run.out.includes('Interrupted (SIGINT)') }).toEqual({ exit: { code: 130, signal: null }, interrupted: true });
  expect(ownedBy(run.child.pid)).toEqual([]);
  expect(leftSince(before)).toEqual({ nginx: [], folders: [] });
  expect(await verifierConnections(run.child.pid)).toEqual([]);
});

test('a SIGKILLed verify leaves nginx and the machines running; the next verify ends them, nginx workers included', async () => {
  const before = snapshot();
  const run = await verifyWithNginxRunning();
  run.child.kill('SIGKILL');
  await run.exited;
  expect(leftSince(before).nginx.length).toBeGreaterThanOrEqual(2); // nginx's master and its worker
  const next = cli(['verify', '1', QUICK_FAIL]);
  const exit = await next.exited;
  expect({ exit, output: next.out }).toEqual({ exit: { code: 1, signal: null }, output: expect.stringMatching(/ended \d+ process\(es\) left by an earlier verify/) });
  await until(() => ownedBy(run.child.pid).length === 0 && leftSince(before).nginx.length === 0, 'the machines and nginx are gone', 5000);
});
