// `run` on a correct rolling restart, as a learner watches it: every worker
// it replaces exits only after its replacement is shown listening (the
// order the program really follows), no placeholder stands where an exit's
// cause is unknown, and the curl lines are the lesson's own routes (its
// starter has neither /config nor /heavy).
import { spawn } from 'node:child_process';
import { copyFileSync } from 'node:fs';
import { join } from 'node:path';
import { findLesson } from '../lib/manifest.js';
import { markedProcesses } from '../lib/harness/processes.js';
import { removeDir, tempDir } from './helpers/cli.js';

const CLI = new URL('../bin/cluster-workshop.js', import.meta.url).pathname;
let dir;
beforeAll(() => {
  dir = tempDir('cw-run-rolling-');
  copyFileSync(findLesson('rolling-restart').paths.solution, join(dir, 'server.js'));
});
afterAll(() => removeDir(dir));

test('a correct rolling restart: each replacement is listening before the worker it replaces exits', async () => {
  const env = { ...process.env, NO_COLOR: '1' };
  const child = spawn(process.execPath, [CLI, 'run', 'rolling-restart', 'server.js', '--port', '0'], { cwd: dir, env, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.on('data', (d) => (out += d));
  child.stderr.on('data', (d) => (out += d));
  const exited = new Promise((resolve) => child.on('exit', (code) => resolve(code)));
  const waitFor = async (pattern, timeoutMs = 30000) => {
    const deadline = Date.now() + timeoutMs;
    while (!pattern.test(out)) {
      if (Date.now() > deadline) throw new Error(`no ${pattern} within ${timeoutMs} ms in:\n${out}`);
      await new Promise((r) => setTimeout(r, 50)); // poll interval of the output, not synchronisation
    }
  };
  try {
    // The lines after it are written one by one and may reach the pipe in a later chunk.
    await waitFor(/Cluster events follow/);
    const primary = Number(/\(primary pid (\d+)\)/.exec(out)[1]);
    expect(out).toMatch(/curl -s 'http:\/\/127\.0\.0\.1:\d+\/slow\?ms=\d+'/);
    expect(out).not.toMatch(/\/config|\/heavy/);
    await waitFor(/(\[cluster\] worker \d+ is listening[\s\S]*){3}/);
    const before = out.length;
    process.kill(primary, 'SIGUSR2');
    await waitFor(/(\[cluster\] worker \d+ exited[\s\S]*){3}/);
    await waitFor(/(\[cluster\] worker \d+ forked \(a replacement\)[\s\S]*){3}/);
    const events = out.slice(before).split('\n').filter((l) => l.startsWith('[cluster]'));
    let listened = 0;
    let exitedSoFar = 0;
    for (const line of events) {
      if (/forked \(a replacement\)/.test(line)) continue;
      if (/is listening/.test(line)) listened += 1;
      if (/exited/.test(line)) {
        exitedSoFar += 1;
        expect({ line, enough: listened >= exitedSoFar }).toEqual({ line, enough: true });
      }
    }
    expect(out).not.toMatch(/code\/signal|your primary's 'exit' event/);
    expect(out).toMatch(/\[cluster\] worker \d+ exited after \d+s\n/);
  } finally {
    child.kill('SIGINT');
    await exited;
  }
  expect(markedProcesses().filter((p) => Number(p.mark.split(':')[0]) === child.pid)).toEqual([]);
}, 90000);
