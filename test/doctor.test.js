// `doctor`, run as a real CLI: a line per check; on this machine every
// required check passes (exit 0); an optional check that fails (Redis) only
// warns; a required one that fails (an unwritable workspace) says the fix
// and exits 1.
import { spawn } from 'node:child_process';
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';

const CLI = new URL('../bin/cluster-workshop.js', import.meta.url).pathname;

function runCli(args, env = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd: tmpdir(), env: { ...process.env, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('exit', (code) => resolve({ code, out }));
  });
}

/** A port nothing listens on. */
async function closedPort() {
  const server = net.createServer();
  await new Promise((r) => server.listen(0, '127.0.0.1', r));
  const { port } = server.address();
  await new Promise((r) => server.close(r));
  return port;
}

test('a ready machine: a line per check, exit 0', async () => {
  const r = await runCli(['doctor']);
  expect(r.code).toBe(0);
  for (const check of [/✓ Node\.js \d+\.\d+\.\d+ \(the workshop needs 20\.17 or newer\)/, /cores available/, /a free port can be bound/, /signals work/, /process table can be read/, /packages are installed/, /workspace .* is writable/, /loopback addresses/]) {
    expect(r.out).toMatch(check);
  }
  expect(r.out).toMatch(/Ready: every required check passed/);
});

test('an optional check that fails warns with its fix; a required one fails with its fix and exit 1', async () => {
  const file = join(mkdtempSync(join(tmpdir(), 'cw-doctor-')), 'not-a-folder');
  writeFileSync(file, '');
  const port = await closedPort();
  const r = await runCli(['doctor', '--dir', join(file, 'workspace')], { REDIS_URL: `redis://127.0.0.1:${port}` });
  expect(r.code).toBe(1);
  expect(r.out).toMatch(new RegExp(`! Redis does not answer at 127\\.0\\.0\\.1:${port} \\(REDIS_URL\\) \\(connection refused`));
  expect(r.out).toMatch(/✗ the workspace .*not-a-folder\/workspace is not writable/);
  expect(r.out).toMatch(/fix: run the workshop from a folder you own.*--dir/);
  expect(r.out).toMatch(/1 required check failed/);
});
