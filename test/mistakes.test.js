// The fixture catalogue (test/catalogue.js) of every lesson that does not
// wait on a daemon, and the rules of derived fixtures.
import { existsSync, readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { loadLessons } from '../lib/manifest.js';
import { applyReplacements, FixturePrograms } from './helpers/fixtures.js';
import { describeCatalogue, DAEMON_LESSONS } from './catalogue.js';

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

// The catalogue of every lesson but those that wait on PM2 and nginx
// (mistakes-daemons.test.js has those).
describeCatalogue(loadLessons().filter((l) => !DAEMON_LESSONS.includes(l.id)), programs);
