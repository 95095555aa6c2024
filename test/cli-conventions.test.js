// Conventions every command keeps: --help, a help screen that lists them all,
// NO_COLOR and FORCE_COLOR, no prompt without a terminal, and a spinner only
// where a person watches a terminal.
import { jest } from '@jest/globals';
import { COMMANDS } from '../lib/cli/main.js';
import { TextReporter } from '../lib/cli/reporter.js';
import { loadLessons } from '../lib/manifest.js';
import { runCli, tempDir, removeDir } from './helpers/cli.js';

let cwd;
beforeAll(() => {
  cwd = tempDir();
});
afterAll(() => removeDir(cwd));

test('the help screen lists every command', async () => {
  const r = await runCli(['--help'], { cwd });
  expect(r.code).toBe(0);
  for (const name of Object.keys(COMMANDS)) expect(r.stdout).toMatch(new RegExp(`^  ${name} +\\S`, 'm'));
});

test.each(Object.keys(COMMANDS))('%s --help prints its usage and exits 0', async (name) => {
  const r = await runCli([name, '--help'], { cwd });
  expect({ code: r.code, stderr: r.stderr }).toEqual({ code: 0, stderr: '' });
  expect(r.stdout).toMatch(new RegExp(`^Usage: cluster-workshop ${name}\\b`));
});

test('an unknown option says what is wrong and shows the usage, exit 2', async () => {
  const r = await runCli(['hint', '--bogus'], { cwd });
  expect(r.code).toBe(2);
  expect(r.stderr).toMatch(/bogus[\s\S]*Usage: cluster-workshop hint/);
});

test('with no command and no terminal it prints the lessons and the commands, and never waits for input', async () => {
  // runCli leaves stdin an open pipe: a prompt would wait for ever and hit the timeout.
  const r = await runCli([], { cwd, timeoutMs: 10000, env: { CI: '' } });
  expect(r.code).toBe(0);
  for (const l of loadLessons()) expect(r.stdout).toContain(l.title);
  for (const name of ['start', 'verify', 'hint', 'solution', 'reset', 'next']) expect(r.stdout).toMatch(new RegExp(`^  ${name} `, 'm'));
  expect(r.stdout).toMatch(/Begin with: .* start/);
});

test('FORCE_COLOR colours output that is not a terminal; NO_COLOR wins over it', async () => {
  const forced = await runCli(['start', '1'], { cwd, env: { FORCE_COLOR: '1' } });
  expect(forced.stdout).toContain('\x1b[1m');
  const plain = await runCli(['start', '1'], { cwd, env: { FORCE_COLOR: '1', NO_COLOR: '1' } });
  expect(plain.code).toBe(0);
  expect(plain.stdout).not.toContain('\x1b[');
});

describe('the verify spinner', () => {
  const step = { id: 'slow', title: 'a slow step' };
  afterEach(() => jest.useRealTimers());

  test('on a terminal, appears after half a second and is erased before the next line', () => {
    jest.useFakeTimers();
    let out = '';
    const reporter = new TextReporter({ write: (s) => (out += s), live: true, columns: () => 80 });
    reporter.stepStart(step, 0, 2);
    jest.advanceTimersByTime(400);
    expect(out).not.toMatch(/[⠋⠙⠹]/);
    jest.advanceTimersByTime(300);
    expect(out).toMatch(/\r\x1b\[2K⠋ step 1\/2: a slow step/);
    reporter.stepLog('a log line');
    expect(out).toMatch(/\r\x1b\[2K\[slow\] a log line\n$/);
    reporter.stepEnd({ id: 'slow', passed: true, durationMs: 900, detail: '' });
    const after = out.length;
    jest.advanceTimersByTime(1000);
    expect(out.length).toBe(after); // stopped with the step
  });

  test('never without a terminal', () => {
    jest.useFakeTimers();
    let out = '';
    const reporter = new TextReporter({ write: (s) => (out += s) });
    reporter.stepStart(step, 0, 1);
    jest.advanceTimersByTime(3000);
    expect(out).toBe('[slow] step 1/1: a slow step\n');
  });
});
