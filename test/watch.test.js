// `watch`, run as a real CLI without a terminal: it verifies at once, again
// after every save, cancels a verify in progress when the file changes
// again (stopping that run's program), and SIGINT in the middle of a verify
// leaves no process behind.
import { spawn } from 'node:child_process';
import { appendFileSync, copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findLesson } from '../lib/manifest.js';
import { isAlive, markedProcesses } from '../lib/harness/processes.js';

const CLI = new URL('../bin/cluster-workshop.js', import.meta.url).pathname;

function startCli(args, cwd) {
  const child = spawn(process.execPath, [CLI, ...args], { cwd, env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
  const cli = { child, out: '' };
  child.stdout.on('data', (d) => (cli.out += d));
  child.stderr.on('data', (d) => (cli.out += d));
  cli.exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  // Waits for a pattern in the output after `from` (an index), so each wait sees only what came since.
  cli.waitFor = async (pattern, { from = 0, timeoutMs = 20000 } = {}) => {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const m = pattern.exec(cli.out.slice(from));
      if (m) return from + m.index + m[0].length;
      if (Date.now() > deadline) throw new Error(`no ${pattern} within ${timeoutMs} ms in:\n${cli.out}`);
      await new Promise((r) => setTimeout(r, 50));
    }
  };
  return cli;
}

const leftBy = (pid) => markedProcesses().filter((p) => Number(p.mark.split(':')[0]) === pid);

test('re-verifies on save, a second save cancels the run in progress, SIGINT mid-verify leaves nothing', async () => {
  const lesson = findLesson('bottleneck');
  const dir = mkdtempSync(join(tmpdir(), 'cw-watch-'));
  const file = join(dir, 'server.js');
  copyFileSync(lesson.paths.exercise, file);
  const cli = startCli(['watch', '1', 'server.js'], dir);
  try {
    // The starter fails at once; watch then waits for a save.
    let at = await cli.waitFor(/FAILED at/);
    at = await cli.waitFor(/Waiting for you to save server\.js/, { from: at });

    // A save starts run 2; a save while it runs cancels it and starts run 3.
    copyFileSync(lesson.paths.solution, file);
    at = await cli.waitFor(/run 2 \(server\.js changed\)/, { from: at });
    const run2 = at;
    at = await cli.waitFor(/\[starts\] ✓ passed/, { from: at });
    const pid2 = Number(/\[starts\] GET \/ -> \{"pid":(\d+)\}/.exec(cli.out.slice(run2))[1]);
    appendFileSync(file, '\n// saved again\n');
    at = await cli.waitFor(/Interrupted \(file changed\); your program was stopped/, { from: at });
    expect(isAlive(pid2)).toBe(false);
    at = await cli.waitFor(/run 3 \(server\.js changed\)/, { from: at });

    // Ctrl-C in the middle of run 3: the program it started goes too.
    await cli.waitFor(/\[starts\] ✓ passed/, { from: at });
    cli.child.kill('SIGINT');
    expect(await cli.exited).toEqual({ code: 0, signal: null });
    expect(cli.out).toMatch(/Stopped watching \(SIGINT\)/);
    expect(leftBy(cli.child.pid)).toEqual([]);
  } finally {
    cli.child.kill('SIGKILL');
  }
});
