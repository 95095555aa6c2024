// The stress ledger counts rounds across runs only while the code they ran is
// unchanged: a change to any file a verdict depends on starts the count again.
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { dependencies, fingerprintOf, readLedger, recordRun, standing, verifierFiles, writeLedger } from '../scripts/stress-ledger.js';
import { loadLessons } from '../lib/manifest.js';

let dir;
beforeEach(() => (dir = mkdtempSync(join(tmpdir(), 'ledger-'))));
afterEach(() => rmSync(dir, { recursive: true, force: true }));

// A lesson with no folders of its own: only its verifier file is its own.
const lessonWith = (verifier) => ({ id: 'no-such-lesson', paths: { verifier } });

test("a lesson's fingerprint changes when its verifier changes, and only then", () => {
  const verifier = join(dir, 'verifier.js');
  writeFileSync(verifier, 'export default [];\n');
  const before = fingerprintOf(lessonWith(verifier));
  expect(fingerprintOf(lessonWith(verifier))).toBe(before);
  writeFileSync(verifier, 'export default [() => {}];\n');
  expect(fingerprintOf(lessonWith(verifier))).not.toBe(before);
});

test('a verifier depends on the shared checks it loads (imports, re-exports, threads), not on the others', () => {
  mkdirSync(join(dir, 'shared'));
  const file = (name, text) => (writeFileSync(join(dir, name), text), join(dir, name));
  const verifier = file('lesson.js', "import { a } from './shared/a.js';\nexport * from './shared/re.js';\n");
  const a = file('shared/a.js', "export const a = new URL('./thread.js', import.meta.url);\n");
  const re = file('shared/re.js', 'export const re = 1;\n');
  const thread = file('shared/thread.js', '');
  file('shared/unused.js', "import './a.js';\n");
  expect(verifierFiles(verifier, { within: dir }).sort()).toEqual([verifier, a, re, thread].sort());
  // In the real tree: fork never loads the drain rules, graceful-shutdown does.
  const [fork, graceful] = ['fork', 'graceful-shutdown'].map((id) => verifierFiles(loadLessons().find((l) => l.id === id).paths.verifier));
  expect(fork.some((f) => f.endsWith('verify/shared/drain.js'))).toBe(false);
  expect(graceful.some((f) => f.endsWith('verify/shared/drain.js'))).toBe(true);
});

test("the PM2 workspace helper counts for the lessons that need PM2, and for no other", () => {
  const deps = (id) => dependencies(loadLessons().find((l) => l.id === id)).map((f) => f.replace(/\\/g, '/'));
  const isPm2Helper = (f) => f.endsWith('/test/helpers/pm2.js');
  expect(deps('process-manager').some(isPm2Helper)).toBe(true);
  expect(deps('fork').some(isPm2Helper)).toBe(false);
  // The other helpers count for every lesson.
  expect(deps('fork').some((f) => f.endsWith('/test/helpers/fixtures.js'))).toBe(true);
});

test("each lesson has its own fingerprint (its solution and fixtures are in it)", () => {
  const [a, b] = loadLessons();
  expect(fingerprintOf(a)).not.toBe(fingerprintOf(b));
});

test('rounds add up under one fingerprint and start again under another', () => {
  const ledger = { lessons: {} };
  recordRun(ledger, { lesson: 'fork', fingerprint: 'aaa', programs: 30, rounds: 2, wrong: 0 });
  recordRun(ledger, { lesson: 'fork', fingerprint: 'aaa', programs: 30, rounds: 3, wrong: 1 });
  expect(ledger.lessons.fork).toMatchObject({ rounds: 5, wrong: 1 });
  recordRun(ledger, { lesson: 'fork', fingerprint: 'bbb', programs: 31, rounds: 1, wrong: 0 });
  expect(ledger.lessons.fork).toMatchObject({ fingerprint: 'bbb', programs: 31, rounds: 1, wrong: 0 });
});

test('a lesson whose files changed after its rounds stands at 0, marked stale', () => {
  const fork = loadLessons().find((l) => l.id === 'fork');
  const path = join(dir, 'ledger.json');
  const ledger = recordRun({ lessons: {} }, { lesson: 'fork', fingerprint: fingerprintOf(fork), programs: 30, rounds: 4, wrong: 0 });
  writeLedger(ledger, path);
  expect(standing(readLedger(path), fork)).toEqual({ rounds: 4, wrong: 0, stale: false });
  const old = recordRun({ lessons: {} }, { lesson: 'fork', fingerprint: 'from-older-code', programs: 30, rounds: 4, wrong: 0 });
  expect(standing(old, fork)).toEqual({ rounds: 0, wrong: 0, stale: true });
});
