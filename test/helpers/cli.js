// Runs the real CLI (node bin/cluster-workshop.js) in a folder, as a learner
// would, without a terminal: stdin is a pipe that is never written to, so a
// command that waited for input would hang and fail its test by timeout.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';

export const BIN = fileURLToPath(new URL('../../bin/cluster-workshop.js', import.meta.url));
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Variables of the test run that would change what the CLI does. */
export function cleanEnv(extra = {}) {
  const env = { ...process.env, CI: 'true' };
  for (const k of ['NO_COLOR', 'FORCE_COLOR', 'CLUSTER_WORKSHOP_DIR', 'npm_command', 'NODE_OPTIONS']) delete env[k];
  return { ...env, ...extra };
}

export function runCli(args, { cwd, env = {}, timeoutMs = 60000, command = [process.execPath, BIN] } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(command[0], [...command.slice(1), ...args], { cwd, env: cleanEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`cluster-workshop ${args.join(' ')} did not end within ${timeoutMs} ms\n${stdout}\n${stderr}`));
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr, all: stdout + stderr });
    });
  });
}

export function tempDir(prefix = 'cw-cli-') {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function removeDir(dir) {
  rmSync(dir, { recursive: true, force: true });
}
