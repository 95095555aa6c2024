// PM2 for the process-manager lesson: found where the learner's program finds
// its packages (npm install pm2 in the workspace: PM2 is AGPL-3.0, so the
// workshop does not depend on it), run in the foreground (pm2-runtime: PM2's
// daemon inside the harness's process group, so the usual teardown ends it
// with everything it forked) with a PM2_HOME of its own in a temporary folder
// (the learner's ~/.pm2 and the apps it runs are never touched), and driven
// with its own CLI (pm2 jlist, pm2 reload all, pm2 stop all) through that
// PM2_HOME, as a learner would drive it.
import { existsSync, mkdtempSync, readFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

export const ECOSYSTEM_FILE = 'ecosystem.config.cjs';
// PM2's daemon checks memory (max_memory_restart) every PM2_WORKER_INTERVAL
// ms: 30 s by default, every second here so the memory step takes seconds.
export const WORKER_INTERVAL_MS = 1000;

/** PM2 as node would find it from the program's folder (node_modules beside it or above): { dir, version }, or null. */
export function findPm2(file) {
  for (let d = dirname(file); ; d = dirname(d)) {
    const pkg = join(d, 'node_modules', 'pm2', 'package.json');
    if (existsSync(pkg)) {
      let version;
      try {
        version = JSON.parse(readFileSync(pkg, 'utf8')).version;
      } catch {
        version = undefined;
      }
      if (existsSync(join(d, 'node_modules', 'pm2', 'bin', 'pm2-runtime'))) return { dir: join(d, 'node_modules', 'pm2'), version };
    }
    if (dirname(d) === d) return null;
  }
}

/**
 * The harness's launcher (LearnerProgram's `launcher`): node runs PM2's
 * pm2-runtime on the ecosystem file beside the program, instead of the
 * program itself. Its temporary folder holds PM2_HOME and the place of
 * CRASH_FILE; the harness removes it once every process of the run is gone.
 */
export function pm2Launcher({ file }) {
  const pm2 = findPm2(file);
  if (!pm2) throw new Error(`PM2 is not installed where ${file} finds its packages`);
  const dir = mkdtempSync(join(tmpdir(), 'cw-pm2-'));
  return {
    argv: [join(pm2.dir, 'bin', 'pm2-runtime'), 'start', ECOSYSTEM_FILE],
    shown: `npx pm2-runtime start ${ECOSYSTEM_FILE}`,
    env: {
      PM2_HOME: join(dir, 'pm2-home'),
      PM2_WORKER_INTERVAL: String(WORKER_INTERVAL_MS),
      // No call home from a verifier run.
      PM2_DISABLE_VERSION_CHECK: 'true',
      CRASH_FILE: join(dir, 'crash-file'),
    },
    dir,
    pm2Dir: pm2.dir,
  };
}

/**
 * Runs `pm2 <args>` against the program's PM2 (same PM2_HOME), logged as the
 * learner would type it. Resolves the harness's tool result ({ code, stdout,
 * stderr, ms, timedOut }); fails the step when PM2 itself has already exited
 * (the CLI would start a daemon of its own).
 */
export async function pm2Command(ctx, args, { timeoutMs = 20000, quiet = false } = {}) {
  const program = ctx.program;
  if (!program || program.exited) {
    ctx.fail('PM2 (pm2-runtime) is no longer running.', {
      expected: 'pm2-runtime keeps running while its app runs',
      actual: program?.exit ? `it ${program.exit.signal ? `was killed by ${program.exit.signal}` : `exited with code ${program.exit.code}`}` : 'not started',
      explanation: 'pm2-runtime exits when its ecosystem file cannot be loaded, when it starts no app, or a few seconds after every instance of the app has stopped or errored.',
      showOutput: true,
    });
  }
  if (!quiet) ctx.log(`$ npx pm2 ${args.join(' ')}`);
  const r = await program.runTool([join(program.launched.pm2Dir, 'bin', 'pm2'), ...args], { timeoutMs, signal: ctx.signal });
  return r;
}

/** The apps PM2 runs, from `pm2 jlist` (one entry per instance, with pm2_env), or null with why. */
export async function pm2List(ctx) {
  const r = await pm2Command(ctx, ['jlist'], { quiet: true, timeoutMs: 10000 });
  // pm2 jlist prints the JSON array on one line; anything else (a warning) on others.
  const line = r.stdout.split('\n').find((l) => l.trim().startsWith('['));
  try {
    return { list: JSON.parse(line), r };
  } catch {
    return { list: null, r };
  }
}

/** PM2's log lines in the program's output ("PM2 log: App [name:0] exited with code [1] ..."), the last n. */
export function pm2LogLines(program, pattern = /PM2 log:/, n = 12) {
  return program.lastLines(200).filter((l) => pattern.test(l)).slice(-n);
}

/** The last lines of a tool's output, for failure messages. */
export function toolOutput(r, n = 8) {
  return `${r.stdout}\n${r.stderr}`.split('\n').map((l) => l.replace(/\x1b\[[0-9;]*m/g, '').trimEnd()).filter(Boolean).slice(-n);
}
