// `doctor`, run as a real CLI: a line per check; on this machine every
// required check passes (exit 0); an optional check that fails (Redis) only
// warns; a required one that fails (an unwritable workspace) says the fix
// and exits 1.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import { runCli } from './helpers/cli.js';

const doctor = (args, env = {}) => runCli(args, { cwd: tmpdir(), env: { NO_COLOR: '1', ...env } });

/** A port nothing listens on. */
async function closedPort() {
  const server = net.createServer();
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

test('a ready machine: a line per check, exit 0', async () => {
  const r = await doctor(['doctor']);
  expect(r.code).toBe(0);
  for (const check of [/✓ Node\.js \d+\.\d+\.\d+ \(the workshop needs 20\.17 or newer\)/, /cores available/, /a free port can be bound/, /signals work/, /process table can be read/, /packages are installed/, /workspace .* is writable/, /loopback addresses/]) {
    expect(r.out).toMatch(check);
  }
  expect(r.out).toMatch(/Ready: every required check passed/);
});

test('an optional check that fails warns with its fix; a required one fails with its fix and exit 1', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cw-doctor-'));
  const file = join(dir, 'not-a-folder');
  writeFileSync(file, '');
  const port = await closedPort();
  const r = await doctor(['doctor', '--dir', join(file, 'workspace')], { REDIS_URL: `redis://127.0.0.1:${port}` });
  rmSync(dir, { recursive: true, force: true });
  expect(r.code).toBe(1);
  expect(r.out).toMatch(new RegExp(`! Redis does not answer at 127\\.0\\.0\\.1:${port} \\(REDIS_URL\\) \\(connection refused`));
  expect(r.out).toMatch(/✗ the workspace .*not-a-folder\/workspace is not writable/);
  expect(r.out).toMatch(/fix: run the workshop from a folder you own.*--dir/);
  expect(r.out).toMatch(/1 required check failed/);
});

test('without unshare and taskset (a PATH that has neither) the containers check warns that its steps are skipped; with them it says they run', async () => {
  const here = await doctor(['doctor']);
  expect(here.out).toMatch(/✓ a program can run as PID 1 of its own PID namespace \(unshare\) on chosen CPUs \(taskset\), as lesson \d+ \(containers\) needs/);
  const empty = mkdtempSync(join(tmpdir(), 'cw-doctor-path-'));
  const r = await doctor(['doctor'], { PATH: empty });
  rmSync(empty, { recursive: true, force: true });
  expect(r.code).toBe(0); // optional: a warning, not a failure
  expect(r.out).toMatch(/! lesson \d+ \(containers\) will skip its PID 1 and CPU steps \(PID 1: unshare is not installed \(util-linux\); CPU set: taskset is not installed/);
  expect(r.out).toMatch(/fix: install util-linux/);
});

test('nginx for the beyond-one-machine lesson: found, it says which; missing (NGINX_BIN elsewhere), it warns with how to install it', async () => {
  const here = await doctor(['doctor']);
  expect(here.out).toMatch(/✓ nginx version: nginx\/[\d.]+ \(\S+\) and the loopback addresses it needs, as lesson \d+ \(beyond-one-machine\) needs \(with Redis\)/);
  const r = await doctor(['doctor'], { NGINX_BIN: '/nonexistent/nginx' });
  expect(r.code).toBe(0); // optional: a warning, not a failure
  expect(r.out).toMatch(/! nginx is not installed; only lesson \d+ \(beyond-one-machine\) needs it, and it is optional/);
  expect(r.out).toMatch(/fix: (Debian\/Ubuntu: sudo apt-get install nginx|brew install nginx redis)/);
});

test("PM2's fix is a command that works now: before the workspace exists it installs into the folder it will be made in", async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cw-doctor-pm2-'));
  try {
    const before = await doctor(['doctor', '--dir', join(dir, 'cluster-workshop')]);
    expect(before.out).toContain(`fix: npm install --prefix ${dir} pm2`);
    expect(before.out).not.toContain(`cd ${join(dir, 'cluster-workshop')}`);
    mkdirSync(join(dir, 'cluster-workshop'));
    const after = await doctor(['doctor', '--dir', join(dir, 'cluster-workshop')]);
    expect(after.out).toContain(`fix: cd ${join(dir, 'cluster-workshop')} && npm install pm2`);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
});
