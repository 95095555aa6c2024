// Which fixtures CI verifies (scripts/ci-plan.js): a lesson proven by a stress
// round on its current code runs its sentinels, any other lesson its whole
// catalogue, and a plan past the budget says so before anything runs.
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describePlan, planCatalogue, provenBy, sentinelReason } from '../scripts/ci-plan.js';
import { SENTINEL_LINE } from '../scripts/stress-ledger.js';
import { loadLessons } from '../lib/manifest.js';
import { fixturesOf, parseExpectations } from './helpers/fixtures.js';
import { chosenFixtures, chosenLessons } from './catalogue.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

// Three lessons of ten fixtures, two of them sentinels each; a ledger that proves all three.
const lesson = (id, fingerprint = `fp-${id}`) => ({
  id,
  fingerprint,
  fixtures: Array.from({ length: 10 }, (_, i) => ({ file: `test/fixtures/${id}/f${i}.js`, sentinel: i < 2 })),
});
const proven = (id) => ({ fingerprint: `fp-${id}`, programs: 10, rounds: 1, wrong: 0 });
const ledger = { lessons: { a: proven('a'), b: proven('b'), c: proven('c') } };
const cheap = { setupS: 0, otherTestsS: 0, parallel: 1, programS: { a: 10, b: 10, c: 10 } };
const modes = (plan) => Object.fromEntries(plan.lessons.map((r) => [r.id, r.mode]));

test('a lesson proven on its current code runs only its sentinels', () => {
  const plan = planCatalogue({ lessons: [lesson('a'), lesson('b'), lesson('c')], ledger, ...cheap });
  expect(modes(plan)).toEqual({ a: 'sentinels', b: 'sentinels', c: 'sentinels' });
  expect(plan.lessons[0].fixtures).toEqual(['test/fixtures/a/f0.js', 'test/fixtures/a/f1.js']);
  expect(plan).toMatchObject({ unproven: [], record: null, overBudget: false, estimateS: 60 });
});

test('a lesson whose verifier changed runs its whole catalogue, the others their sentinels', () => {
  const plan = planCatalogue({ lessons: [lesson('a'), lesson('b', 'fp-b-changed'), lesson('c')], ledger, ...cheap });
  expect(modes(plan)).toEqual({ a: 'sentinels', b: 'whole', c: 'sentinels' });
  expect(plan.lessons[1]).toMatchObject({ why: 'changed since its last stress round', of: 10 });
  expect(plan.lessons[1].fixtures).toHaveLength(10);
  expect(plan.record).toBe('npm run stress 1 -- --lessons b --record');
  expect(describePlan(plan)).toContain('npm run stress 1 -- --lessons b --record');
});

test('a harness change (every fingerprint new) is over the budget and names the command that records them all', () => {
  const lessons = ['a', 'b', 'c'].map((id) => lesson(id, `new-${id}`));
  const plan = planCatalogue({ lessons, ledger, ...cheap, budgetS: 200 });
  expect(plan.unproven).toEqual(['a', 'b', 'c']);
  expect(plan.overBudget).toBe(true);
  const text = describePlan(plan);
  expect(text).toContain('OVER BUDGET');
  expect(text).toContain('npm run stress 1 -- --lessons a,b,c --record');
  // Within the budget the same plan runs (whole catalogues are affordable for small lessons).
  expect(planCatalogue({ lessons, ledger, ...cheap, budgetS: 300 }).overBudget).toBe(false);
});

test('a lesson never stressed, or with a wrong verdict in its rounds, is not proven', () => {
  expect(provenBy(undefined, 'x')).toEqual({ proven: false, why: 'never stressed' });
  expect(provenBy({ fingerprint: 'x', rounds: 2, wrong: 1 }, 'x').proven).toBe(false);
  expect(provenBy({ fingerprint: 'x', rounds: 0, wrong: 0 }, 'x').proven).toBe(false);
  expect(provenBy({ fingerprint: 'x', rounds: 1, wrong: 0 }, 'x').proven).toBe(true);
  const plan = planCatalogue({ lessons: [lesson('a'), lesson('new')], ledger, ...cheap });
  expect(modes(plan)).toEqual({ a: 'sentinels', new: 'whole' });
  expect(plan.lessons[1].why).toBe('never stressed');
});

test("marking a fixture a sentinel leaves its lesson's fingerprint as it was", () => {
  const text = '// Mistake: x\n// expect: fail at starts\nconsole.log(1);\n';
  const marked = text.replace('starts\n', 'starts\n// sentinel: the first of its fixtures failing at starts\n');
  expect(sentinelReason(marked)).toBe('the first of its fixtures failing at starts');
  expect(sentinelReason(text)).toBeNull();
  expect(marked.replace(SENTINEL_LINE, '')).toBe(text);
});

test('the catalogue runs what the plan chose for a lesson, and every fixture without a plan', () => {
  const [fork] = loadLessons().filter((l) => l.id === 'fork');
  const all = fixturesOf(fork);
  const dir = mkdtempSync(join(tmpdir(), 'ci-plan-'));
  try {
    const plan = join(dir, 'plan.json');
    writeFileSync(plan, JSON.stringify({ lessons: [{ id: 'fork', fixtures: [relative(ROOT, all[3])] }] }));
    expect(chosenFixtures(fork, { plan })).toEqual([all[3]]);
    expect(chosenFixtures(fork, { plan: undefined })).toEqual(all);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  expect(chosenLessons(loadLessons(), 'fork,capstone').map((l) => l.id)).toEqual(['fork', 'capstone']);
});

// The sentinels of the real catalogue: every step its fixtures fail at, and
// its correct programs (blind-authored ones where it has them), at most 40 %.
describe.each(loadLessons().map((l) => [l.id, l]))('%s: its sentinels', (id, l) => {
  const fixtures = fixturesOf(l).map((file) => ({
    file,
    name: basename(dirname(file)) === id ? basename(file) : `${basename(dirname(file))}/`,
    expect: parseExpectations(file),
    sentinel: sentinelReason(readFileSync(file, 'utf8')) !== null,
  }));
  const sentinels = fixtures.filter((f) => f.sentinel);
  test('cover every step at which its fixtures fail', () => {
    const steps = [...new Set(fixtures.flatMap((f) => f.expect.failAt ?? []))];
    const uncovered = steps.filter((s) => !sentinels.some((f) => f.expect.failAt?.includes(s)));
    // Mark one fixture that fails at each of these with "// sentinel: why" under its expect lines.
    expect(uncovered).toEqual([]);
  });
  test('include its correct programs, blind-authored where it has them', () => {
    const passing = fixtures.filter((f) => f.expect.pass);
    if (passing.length) expect(sentinels.some((f) => f.expect.pass)).toBe(true);
    if (passing.some((f) => /blind/.test(f.name))) expect(sentinels.some((f) => f.expect.pass && /blind/.test(f.name))).toBe(true);
  });
  test('are a part of its catalogue, not all of it', () => {
    expect(sentinels.length).toBeLessThanOrEqual(Math.ceil(fixtures.length * 0.4));
  });
});

test("npm test's last lines: the slowest test files, the total, and each failure with the lines that explain it", async () => {
  const { summary } = await import('../scripts/test-summary.js');
  const file = (name, seconds, assertions, status = 'passed') => ({
    name: join(ROOT, name), startTime: 0, endTime: seconds * 1000, status, message: '', assertionResults: assertions,
  });
  const text = summary([
    { name: 'main', code: 1, report: { testResults: [
      file('test/a.test.js', 12, [{ fullName: 'a works', status: 'passed', failureMessages: [] }]),
      file('test/b.test.js', 40, [{ fullName: 'b holds', status: 'failed', failureMessages: ['\x1b[31mError: expected 2, got 3\x1b[39m\n    at Object.<anonymous> (test/b.test.js:3:9)'] }], 'failed'),
    ] } },
    { name: 'node 22', code: 1, report: null },
  ]);
  const lines = text.split('\n');
  expect(lines[0]).toContain('15 slowest test files (of 2; 52 s in all');
  expect(lines[1]).toMatch(/^\s+40 s {2}test\/b\.test\.js {2}\[main\]$/);
  expect(text).toContain('✕ [main] test/b.test.js › b holds');
  expect(text).toContain('Error: expected 2, got 3');
  expect(text).not.toContain('at Object.<anonymous>');
  expect(text).not.toContain('\x1b[');
  expect(text).toContain('node 22: ended with exit code 1 and wrote no test results');
});
