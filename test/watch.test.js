// `watch`, run as a real CLI without a terminal: it verifies at once, again
// after every save, cancels a verify in progress when the file changes
// again (stopping that run's program), and SIGINT in the middle of a verify
// leaves no process behind.
import { appendFileSync, copyFileSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findLesson } from '../lib/manifest.js';
import { isAlive, markedProcesses } from '../lib/harness/processes.js';
import { startCli } from './helpers/cli.js';

const startIn = (args, cwd) => startCli(args, { cwd, env: { NO_COLOR: '1' } });

const leftBy = (pid) => markedProcesses().filter((p) => Number(p.mark.split(':')[0]) === pid);

test('re-verifies on save, a second save cancels the run in progress, SIGINT mid-verify leaves nothing', async () => {
  const lesson = findLesson('bottleneck');
  const dir = mkdtempSync(join(tmpdir(), 'cw-watch-'));
  const file = join(dir, 'server.js');
  copyFileSync(lesson.paths.exercise, file);
  const cli = startIn(['watch', '1', 'server.js'], dir);
  try {
    // The starter fails at once; watch then waits for a save.
    let at = (await cli.waitFor(/FAILED at/)).end;
    at = (await cli.waitFor(/Waiting for you to save server\.js/, { from: at })).end;

    // A save starts run 2; a save while it runs cancels it and starts run 3.
    copyFileSync(lesson.paths.solution, file);
    at = (await cli.waitFor(/run 2 \(server\.js changed\)/, { from: at })).end;
    const run2 = at;
    at = (await cli.waitFor(/\[starts\] ✓ passed/, { from: at })).end;
    const pid2 = Number(/\[starts\] GET \/ -> \{"pid":(\d+)\}/.exec(cli.out.slice(run2))[1]);
    appendFileSync(file, '\n// saved again\n');
    at = (await cli.waitFor(/Interrupted \(file changed\); your program was stopped/, { from: at })).end;
    expect(isAlive(pid2)).toBe(false);
    at = (await cli.waitFor(/run 3 \(server\.js changed\)/, { from: at })).end;

    // Ctrl-C in the middle of run 3: the program it started goes too.
    await cli.waitFor(/\[starts\] ✓ passed/, { from: at });
    cli.child.kill('SIGINT');
    expect(await cli.exited).toEqual({ code: 0, signal: null });
    expect(cli.out).toMatch(/Stopped watching \(SIGINT\)/);
    expect(leftBy(cli.child.pid)).toEqual([]);
  } finally {
    cli.child.kill('SIGKILL');
    await cli.exited;
    rmSync(dir, { recursive: true, force: true });
  }
});

test('files each verify writes beside the program (progress, the classroom join) never start a run; the program and its modules do', async () => {
  const { changeRunsVerify } = await import('../lib/cli/commands/watch.js');
  const { STATE_FILE } = await import('../lib/progress.js');
  const { JOIN_FILE } = await import('../lib/classroom/client.js');
  // A program saved in the workspace folder itself: each report rewrites classroom.json there, which would start the next run.
  expect([STATE_FILE, JOIN_FILE, '.progress.json.123.abcd.tmp', 'classroom.json.123.tmp'].filter((n) => changeRunsVerify(n, 'mine.js'))).toEqual([]);
  expect(['mine.js', 'routes.js', 'config.json', 'worker.mjs'].filter((n) => changeRunsVerify(n, 'mine.js'))).toEqual(['mine.js', 'routes.js', 'config.json', 'worker.mjs']);
});
