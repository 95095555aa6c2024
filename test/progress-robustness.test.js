// The progress file survives what learners' disks do to it: truncated, corrupt,
// empty, unreadable, read-only, or in a folder that cannot be written. Each
// case gives a clear warning, a fallback (set aside, or memory only), and
// never a crash, both in the Progress class and through the CLI. Permission
// cases run as an unprivileged user when the tests run as root (root ignores
// file modes).
import { spawnSync } from 'node:child_process';
import { chmodSync, chownSync, copyFileSync, existsSync, linkSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Progress, STATE_FILE } from '../lib/progress.js';
import { PACKAGE_ROOT } from '../lib/manifest.js';

const BIN = join(PACKAGE_ROOT, 'bin', 'cluster-workshop.js');
const QUICK_FAIL = join(PACKAGE_ROOT, 'test', 'fixtures', 'harness', 'syntax-error.js');
const IS_ROOT = process.getuid?.() === 0;
const NOBODY = 65534;

// The node binary the unprivileged user runs: this one, unless it lives where
// that user cannot reach (a cache in root's home), then a link or copy in /tmp.
let nodeBinary = process.execPath;
let binaryDir;
beforeAll(() => {
  if (!IS_ROOT) return;
  const probe = spawnSync(process.execPath, ['-e', '0'], { uid: NOBODY, gid: NOBODY });
  if (probe.status === 0) return;
  binaryDir = mkdtempSync(join(tmpdir(), 'cw-node-'));
  chmodSync(binaryDir, 0o755);
  nodeBinary = join(binaryDir, 'node');
  try {
    linkSync(process.execPath, nodeBinary);
  } catch {
    copyFileSync(process.execPath, nodeBinary);
    chmodSync(nodeBinary, 0o755);
  }
});
afterAll(() => {
  if (binaryDir) rmSync(binaryDir, { recursive: true, force: true });
});

let base;
beforeEach(() => {
  base = mkdtempSync(join(tmpdir(), 'cw-progress-'));
  chmodSync(base, 0o755);
});
afterEach(() => {
  rmSync(base, { recursive: true, force: true });
});

function workspace(content) {
  const dir = join(base, 'ws');
  mkdirSync(dir, { recursive: true });
  if (content !== undefined) writeFileSync(join(dir, STATE_FILE), content);
  return dir;
}

const GOOD = JSON.stringify({ version: 1, current: 'fork', lessons: { bottleneck: { status: 'done', attempts: 2 } }, measurements: { 'bottleneck.rps': 45 } });

describe('Progress.load and save', () => {
  test.each([
    ['truncated', GOOD.slice(0, 40)],
    ['corrupt bytes', Buffer.from([0xff, 0xfe, 0x00, 0x7b, 0x22])],
    ['empty (truncated to nothing)', ''],
    ['valid JSON of the wrong shape', '[1, 2, 3]'],
    ['a version with no lessons', '{"version":1,"lessons":null}'],
  ])('a %s progress file is set aside with a warning, and progress starts afresh and saves', (_, content) => {
    const dir = workspace(content);
    const progress = Progress.load(dir);
    expect(progress.warnings).toEqual([expect.stringMatching(/could not be read .* moved to .*\.corrupt-\d+/)]);
    expect(progress.statusOf('bottleneck')).toBe('not started');
    // The unreadable file is kept (the learner may want it), beside a fresh one.
    expect(readdirSync(dir).filter((f) => f.includes('.corrupt-'))).toHaveLength(1);
    progress.recordVerify('bottleneck', { passed: true, steps: [] });
    expect(progress.save()).toBe(true);
    expect(Progress.load(dir).statusOf('bottleneck')).toBe('done');
  });

  test('a good progress file is read as it is', () => {
    const progress = Progress.load(workspace(GOOD));
    expect(progress.warnings).toEqual([]);
    expect(progress.statusOf('bottleneck')).toBe('done');
    expect(progress.measurements().get('bottleneck.rps')).toBe(45);
  });

  test('a progress.json that is a folder does not crash: memory only or set aside, with a warning', () => {
    const dir = workspace();
    mkdirSync(join(dir, STATE_FILE));
    const progress = Progress.load(dir);
    expect(progress.warnings).toEqual([expect.stringContaining('could not be read')]);
    progress.recordVerify('fork', { passed: false, steps: [{ id: 'worker-count', passed: false }] });
    expect(() => progress.save()).not.toThrow();
  });

  test('a workspace under a file (ENOTDIR) cannot be written: save says so and keeps progress in memory', () => {
    writeFileSync(join(base, 'not-a-folder'), 'x');
    const progress = Progress.load(join(base, 'not-a-folder', 'ws'), { create: true });
    progress.recordVerify('fork', { passed: true, steps: [] });
    expect(progress.save()).toBe(false);
    expect(progress.warnings).toEqual([expect.stringMatching(/Could not save progress in .*ENOTDIR.*memory only/)]);
    expect(progress.statusOf('fork')).toBe('done');
    expect(progress.save()).toBe(false); // and asking again neither throws nor repeats the warning
    expect(progress.warnings).toHaveLength(1);
  });
});

// The permission cases, run in a child process as an unprivileged user when needed.
const asLearner = IS_ROOT ? { uid: NOBODY, gid: NOBODY } : {};
function giveToLearner(path) {
  if (IS_ROOT) chownSync(path, NOBODY, NOBODY);
}

function cli(args, { cwd = base } = {}) {
  return spawnSync(nodeBinary, [BIN, ...args], {
    cwd,
    env: { ...process.env, NO_COLOR: '1', HOME: base, CI: '1' },
    encoding: 'utf8',
    timeout: 60000,
    ...asLearner,
  });
}

describe('through the CLI', () => {
  test('list with a corrupt progress file warns, sets it aside, and lists the lessons', () => {
    const dir = workspace('{"version":1,"less');
    giveToLearner(dir);
    giveToLearner(join(dir, STATE_FILE));
    const r = cli(['list', '--dir', dir]);
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 0, stderr: expect.stringContaining('could not be read') });
    expect(r.stdout).toContain('bottleneck');
  });

  test('verify with a read-only workspace says progress is not saved, and gives its verdict', () => {
    const dir = workspace(GOOD);
    chmodSync(join(dir, STATE_FILE), 0o444);
    chmodSync(dir, 0o555);
    const r = cli(['verify', '1', QUICK_FAIL, '--dir', dir]);
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 1, stderr: expect.stringContaining('Could not save progress') });
    expect(r.stdout).toContain('SyntaxError');
    expect(readFileSync(join(dir, STATE_FILE), 'utf8')).toBe(GOOD);
  });

  test('verify with an unreadable progress file warns and still gives its verdict', () => {
    const dir = workspace(GOOD);
    giveToLearner(dir);
    chmodSync(join(dir, STATE_FILE), 0o000);
    const r = cli(['verify', '1', QUICK_FAIL, '--dir', dir]);
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 1, stderr: expect.stringContaining('could not be read') });
    expect(r.stdout).toContain('SyntaxError');
  });

  test('verify in a home folder that cannot be written runs, with a warning at most, never a crash', () => {
    chmodSync(base, 0o555);
    const r = cli(['verify', '1', QUICK_FAIL], { cwd: base });
    chmodSync(base, 0o755);
    expect({ status: r.status, stderr: r.stderr }).toEqual({ status: 1, stderr: expect.not.stringContaining('unexpected error') });
    expect(r.stdout).toContain('SyntaxError');
    expect(existsSync(join(base, 'cluster-workshop'))).toBe(false);
  });

  test('start in a home folder that cannot be written says why, with no stack trace', () => {
    chmodSync(base, 0o555);
    const r = cli(['start', '1'], { cwd: base });
    chmodSync(base, 0o755);
    expect(r.status).not.toBe(0);
    expect(r.status).not.toBe(3); // 3 is an internal error: a crash
    expect(`${r.stdout}${r.stderr}`).toMatch(/EACCES|permission|cannot be written|not writable|could not/i);
    expect(r.stderr).not.toMatch(/^\s+at /m);
  });
});
