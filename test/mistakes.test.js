// Every fixture program under test/fixtures/<lesson>/ gets the verdict its
// header promises: a mistake fails at the named step with the named words; a
// correct-but-unusual program passes. After each run, no process is left.
// A derived fixture (// derive-from:) runs as its source with its
// replacements, written to a temporary folder that is removed at the end.
import { existsSync, readFileSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { loadLessons } from '../lib/manifest.js';
import { fixturesOf, parseExpectations, textsFor, applyReplacements, FixturePrograms } from './helpers/fixtures.js';
import { verifyFile, leftovers, verdictOf, PASSED, failedAt } from './helpers/verify.js';

const programs = new FixturePrograms();
afterAll(() => programs.cleanup());

describe('derived fixtures', () => {
  const source = 'a\n  b\n  c\n  b\n';
  const block = (find, put) => ({ line: 7, find: find.split('\n'), put: put.split('\n') });

  test('replace whole lines found exactly once, leading white space included', () => {
    expect(applyReplacements(source, [block('  c', '  C\n  D')])).toBe('a\n  b\n  C\n  D\n  b\n');
  });

  test('refuse, naming the fixture line, a block the source no longer holds or holds twice', () => {
    const opts = { fixture: 'f.js', source: 's.js' };
    expect(() => applyReplacements(source, [block('c', 'x')], opts)).toThrow(/^f\.js:7: replacement 1 of 1 must match exactly once in s\.js[^]*stand nowhere/);
    expect(() => applyReplacements(source, [block('  b', 'x')], opts)).toThrow(/stand 2 times \(lines 2, 4\)/);
  });

  test("a PM2 lesson's solution runs from a workspace where PM2 resolves (stress verifies it there)", () => {
    const lesson = loadLessons().find((l) => l.id === 'process-manager');
    const file = programs.solutionOf(lesson);
    expect(file).not.toBe(lesson.paths.solution);
    expect(readFileSync(file, 'utf8')).toBe(readFileSync(lesson.paths.solution, 'utf8'));
    expect(existsSync(join(dirname(file), 'ecosystem.config.cjs'))).toBe(true);
    expect(existsSync(join(dirname(dirname(file)), 'node_modules', 'pm2', 'package.json'))).toBe(true);
    const fork = loadLessons().find((l) => l.id === 'fork');
    expect(programs.solutionOf(fork)).toBe(fork.paths.solution);
  });
});

for (const lesson of loadLessons()) {
  const fixtures = fixturesOf(lesson);
  if (fixtures.length === 0) continue;
  describe(`${lesson.number} ${lesson.id}: fixture programs`, () => {
    for (const file of fixtures) {
      const expectation = parseExpectations(file);
      const name = basename(dirname(file)) === lesson.id ? basename(file) : basename(dirname(file));
      test(`${name} ${expectation.pass ? 'passes' : `fails at ${expectation.failAt.join(' or ')}`}`, async () => {
        const program = programs.programOf(file);
        const result = await verifyFile(lesson.id, program, { readyTimeoutMs: expectation.readyTimeoutMs });
        if (expectation.pass) {
          expect(verdictOf(result)).toMatch(PASSED);
        } else {
          expect(verdictOf(result)).toMatch(failedAt(expectation.failAt));
          for (const text of textsFor(expectation, result.failedStep.id)) expect(result.failedStep.detail).toContain(text);
        }
        expect(leftovers()).toEqual([]);
      });
    }
  });
}
