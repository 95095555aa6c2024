// Runs the real CLI (node bin/cluster-workshop.js) in a folder, as a learner
// would, without a terminal: stdin is a pipe that is never written to, so a
// command that waited for input would hang and fail its test by timeout.
// runCli waits for the end; startCli returns at once, for commands that run
// until stopped (run, watch, verify interrupted mid-run).
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { untilText } from './until.js';

export const BIN = fileURLToPath(new URL('../../bin/cluster-workshop.js', import.meta.url));
export const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** Variables of the test run that would change what the CLI does. */
export function cleanEnv(extra = {}) {
  const env = { ...process.env, CI: 'true' };
  for (const k of ['NO_COLOR', 'FORCE_COLOR', 'CLUSTER_WORKSHOP_DIR', 'npm_command', 'NODE_OPTIONS']) delete env[k];
  return { ...env, ...extra };
}

function spawnCli(args, { cwd, env, command }) {
  const child = spawn(command[0], [...command.slice(1), ...args], { cwd, env: cleanEnv(env), stdio: ['pipe', 'pipe', 'pipe'] });
  const cli = { child, pid: child.pid, stdout: '', stderr: '', out: '' };
  child.stdout.on('data', (d) => {
    cli.stdout += d;
    cli.out += d;
  });
  child.stderr.on('data', (d) => {
    cli.stderr += d;
    cli.out += d;
  });
  return cli;
}

/**
 * Runs the CLI to its end: { code, stdout, stderr, all, out, pid } (all and
 * out: stdout and stderr as they interleaved; pid: the CLI's, which marks the
 * programs it started).
 */
export function runCli(args, { cwd, env = {}, timeoutMs = 60000, command = [process.execPath, BIN] } = {}) {
  return new Promise((resolve, reject) => {
    const cli = spawnCli(args, { cwd, env, command });
    const timer = setTimeout(() => {
      cli.child.kill('SIGKILL');
      reject(new Error(`cluster-workshop ${args.join(' ')} did not end within ${timeoutMs} ms\n${cli.out}`));
    }, timeoutMs);
    cli.child.on('error', reject);
    cli.child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout: cli.stdout, stderr: cli.stderr, all: cli.out, out: cli.out, pid: cli.pid });
    });
  });
}

/**
 * Starts the CLI and returns at once: { child, pid, out (so far), exited
 * (resolves { code, signal }), waitFor(pattern, { from, timeoutMs }) } where
 * waitFor resolves with the match (its `end`: where to look from next time).
 */
export function startCli(args, { cwd, env = {}, command = [process.execPath, BIN] } = {}) {
  const cli = spawnCli(args, { cwd, env, command });
  cli.exited = new Promise((resolve) => cli.child.on('exit', (code, signal) => resolve({ code, signal })));
  cli.waitFor = (pattern, options) => untilText(() => cli.out, pattern, options);
  return cli;
}

export function tempDir(prefix = 'cw-cli-') {
  return mkdtempSync(join(tmpdir(), prefix));
}

export function removeDir(dir) {
  rmSync(dir, { recursive: true, force: true });
}
