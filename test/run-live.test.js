// The live cluster view of `run`, in a real 80x24 terminal (tmux): it shows
// the primary and its 3 workers, the k key kills a worker and the panel
// counts the restart from the process table, q quits with exit 0 and
// leaves no process behind.
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findLesson } from '../lib/manifest.js';
import { RUN_MARKER, markedProcesses, readEnvironment } from '../lib/harness/processes.js';

const CLI = new URL('../bin/cluster-workshop.js', import.meta.url).pathname;
const SESSION = `cw-live-${process.pid}`;

function hasTmux() {
  try {
    execFileSync('tmux', ['-V'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}

const tmux = (...args) => execFileSync('tmux', args, { encoding: 'utf8' });
const screen = () => tmux('capture-pane', '-p', '-t', SESSION);

async function waitForScreen(pattern, timeoutMs = 20000) {
  const deadline = Date.now() + timeoutMs;
  let text = '';
  for (;;) {
    try {
      text = screen();
    } catch {
      // the pane is not there yet
    }
    const m = pattern.exec(text);
    if (m) return m;
    if (Date.now() > deadline) throw new Error(`no ${pattern} on screen within ${timeoutMs} ms:\n${text}`);
    await new Promise((r) => setTimeout(r, 100));
  }
}

(hasTmux() ? describe : describe.skip)('run: the live view in a terminal (needs tmux)', () => {
  afterAll(() => {
    try {
      tmux('kill-session', '-t', SESSION);
    } catch {
      // already gone
    }
  });

  test('k kills a worker, the panel counts the restart, q leaves nothing behind', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cw-live-'));
    copyFileSync(findLesson('respawn').paths.solution, join(dir, 'server.js'));
    const command = `cd ${dir} && env -u CI TERM=xterm NO_COLOR=1 ${process.execPath} ${CLI} run 3 server.js --port 0; echo "EXIT=$?"; sleep 60`;
    tmux('new-session', '-d', '-s', SESSION, '-x', '80', '-y', '24', command);

    const [, primary] = await waitForScreen(/primary (\d+) · up \S+ · workers 3\/3 · restarts 0/);
    const mark = readEnvironment(Number(primary))?.[RUN_MARKER];
    expect(mark).toBeDefined();
    await waitForScreen(/(answering[\s\S]*){3}/); // all three answered the panel's probes
    // It fits 80x24: the title on the first row, the keys on the last.
    const rows = screen().replace(/\n+$/, '').split('\n');
    expect(rows[0]).toMatch(/^cluster-workshop run · lesson 3 respawn · http:/);
    expect(rows).toHaveLength(24);
    expect(rows[23]).toMatch(/\[b\] burst .*\[k\] kill a worker .*\[q\] quit/);

    tmux('send-keys', '-t', SESSION, 'k');
    await waitForScreen(/worker \d+ died after \S+ \(SIGKILL, sent from here\)/);
    await waitForScreen(/workers 3\/3 · restarts 1 · deaths 1/);
    await waitForScreen(/worker \d+ forked \(a replacement\)/);

    tmux('send-keys', '-t', SESSION, 'q');
    await waitForScreen(/EXIT=0/);
    expect(screen()).toMatch(/no process of your program is left/);
    expect(markedProcesses(mark)).toEqual([]);
  });
});
