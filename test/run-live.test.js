// The live cluster view of `run`, in a real 80x24 terminal (tmux): it shows
// the primary and its 3 workers, the k key kills a worker and the panel
// counts the restart from the process table, q quits with exit 0 and
// leaves no process behind. A program that runs two rolling restarts at once
// (u pressed twice) is judged by the verifier's own fork watchdog: a bounded
// surplus of workers, not "forking without limit".
import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdtempSync } from 'node:fs';
import { forkLimit } from '../lib/harness/watchdog.js';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findLesson } from '../lib/manifest.js';
import { until, untilText } from './helpers/until.js';
import { RUN_MARKER, markedProcesses, readEnvironment, workerPidsOf } from '../lib/harness/processes.js';

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

function screenSoFar() {
  try {
    return screen();
  } catch {
    return ''; // the pane is not there yet
  }
}

const waitForScreen = (pattern, timeoutMs = 20000) => untilText(screenSoFar, pattern, { timeoutMs, intervalMs: 100 });

(hasTmux() ? describe : describe.skip)('run: the live view in a terminal (needs tmux)', () => {
  afterEach(() => {
    try {
      tmux('kill-session', '-t', SESSION);
    } catch {
      // already gone
    }
  });

  test('k kills a worker, the panel counts the restart, q leaves nothing behind', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cw-live-'));
    copyFileSync(findLesson('respawn').paths.solution, join(dir, 'server.js'));
    const command = `cd ${dir} && env -u CI TERM=xterm NO_COLOR=1 ${process.execPath} ${CLI} run respawn server.js --port 0; echo "EXIT=$?"; sleep 60`;
    tmux('new-session', '-d', '-s', SESSION, '-x', '80', '-y', '24', command);

    const [, primary] = await waitForScreen(/primary (\d+) · up \S+ · workers 3\/3 · restarts 0/);
    const mark = readEnvironment(Number(primary))?.[RUN_MARKER];
    expect(mark).toBeDefined();
    await waitForScreen(/(\d+ +\S+ +[█·]+ +\d+ listening[\s\S]*){3}/); // all three answered the panel's probes
    // It fits 80x24: the title on the first row, the keys on the last.
    const rows = screen().replace(/\n+$/, '').split('\n');
    expect(rows[0]).toMatch(new RegExp(`^cluster-workshop run · lesson ${findLesson('respawn').number} respawn · http:`));
    expect(rows).toHaveLength(24);
    expect(rows[23]).toMatch(/\[b\] burst .*\[k\] kill a worker .*\[q\] quit/);

    tmux('send-keys', '-t', SESSION, 'k');
    await waitForScreen(/worker \d+ exited after \S+ \(SIGKILL, sent from here\)/);
    await waitForScreen(/workers 3\/3 · restarts 1 · deaths 1/);
    await waitForScreen(/worker \d+ forked \(a replacement\)/);

    tmux('send-keys', '-t', SESSION, 'q');
    await waitForScreen(/EXIT=0/);
    expect(screen()).toMatch(/no process of your program is left/);
    expect(markedProcesses(mark)).toEqual([]);
  });

  test('u pressed twice on a program that runs two restarts at once: three sets of workers for a while, never called forking without limit', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'cw-live-'));
    copyFileSync(new URL('./fixtures/harness/parallel-restarts.js', import.meta.url).pathname, join(dir, 'server.js'));
    const command = `cd ${dir} && env -u CI TERM=xterm NO_COLOR=1 ${process.execPath} ${CLI} run rolling-restart server.js --port 0; echo "EXIT=$?"; sleep 60`;
    tmux('new-session', '-d', '-s', SESSION, '-x', '80', '-y', '24', command);

    const [, primaryText] = await waitForScreen(/primary (\d+) · up \S+ · workers 3\/3 · restarts 0/);
    const primary = Number(primaryText);
    await waitForScreen(/(answering[\s\S]*){3}/);
    let peak = 0;
    const sampler = setInterval(() => (peak = Math.max(peak, workerPidsOf(primary).length)), 10);
    try {
      tmux('send-keys', '-t', SESSION, 'u');
      // The second SIGUSR2 while the first restart runs (its old workers drain for 3 s).
      await until(() => workerPidsOf(primary).length > 3, 'the first restart forked its workers');
      tmux('send-keys', '-t', SESSION, 'u');
      await until(() => workerPidsOf(primary).length === 9, () => `three sets of workers side by side (now ${workerPidsOf(primary).length}), the panel showing:\n${screenSoFar()}`);
      // Both restarts end with the last set alone.
      await until(
        () => workerPidsOf(primary).length === 3,
        () => `the restarts settled at 3 workers (now ${workerPidsOf(primary).length}; peak ${peak}), the panel showing:\n${screenSoFar()}`,
        30000,
      );
    } finally {
      clearInterval(sampler);
    }
    // Three sets: the primary and 9 workers are more than the 1 + 3 + 4
    // processes run allowed before, and within the one limit verify uses.
    expect(peak).toBe(9);
    expect(1 + peak).toBeGreaterThan(1 + 3 + 4);
    expect(1 + peak).toBeLessThanOrEqual(forkLimit(3));
    await waitForScreen(/workers 3\/3 · restarts 6/);
    expect(screen()).not.toMatch(/kept going|without limit|isPrimary/);

    tmux('send-keys', '-t', SESSION, 'q');
    await waitForScreen(/EXIT=0/);
    expect(screen()).not.toMatch(/kept going|without limit/);
    expect(markedProcesses().filter((p) => workerPidsOf(primary).includes(p.pid) || p.pid === primary)).toEqual([]);
  });
});
