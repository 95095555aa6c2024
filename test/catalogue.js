// The fixture catalogue: every program under test/fixtures/<lesson>/ gets the
// verdict its header promises: a mistake fails at the named step with the
// named words; a correct-but-unusual program passes. After each run, no
// process is left. A derived fixture (// derive-from:) runs as its source
// with its replacements, written to a temporary folder that is removed at
// the end. Two test files share it (mistakes.test.js, mistakes-daemons.test.js)
// so that `npm test` can run the lessons that wait on PM2 and nginx beside
// the others (scripts/test.js).
//
// CI verifies the part of each lesson's catalogue that scripts/ci-plan.js
// chose (CATALOGUE_PLAN: the plan's JSON file, written by scripts/test.js):
// its sentinels where a stress round proved the code, else all of it.
// CATALOGUE_LESSONS=a,b keeps those lessons only (a piece of npm test). With
// neither, every fixture runs.
import { readFileSync } from 'node:fs';
import { basename, dirname, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { fixturesOf, parseExpectations, textsFor } from './helpers/fixtures.js';
import { verifyFile, leftovers, verdictOf, PASSED, failedAt } from './helpers/verify.js';

/** The lessons whose verifiers spend their time waiting on a daemon (PM2, nginx). */
export const DAEMON_LESSONS = ['process-manager', 'beyond-one-machine'];

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** The fixtures of a lesson that this run verifies (see CATALOGUE_PLAN above). */
export function chosenFixtures(lesson, { plan = process.env.CATALOGUE_PLAN } = {}) {
  const all = fixturesOf(lesson);
  if (!plan) return all;
  const row = JSON.parse(readFileSync(plan, 'utf8')).lessons.find((r) => r.id === lesson.id);
  if (!row) return all;
  const chosen = new Set(row.fixtures);
  return all.filter((f) => chosen.has(relative(ROOT, f)));
}

/** The lessons this run verifies of `lessons` (CATALOGUE_LESSONS, when set). */
export function chosenLessons(lessons, only = process.env.CATALOGUE_LESSONS) {
  if (!only) return lessons;
  const ids = only.split(',').map((s) => s.trim());
  return lessons.filter((l) => ids.includes(l.id));
}

/** One describe block per lesson, one test per fixture program, run through `programs` (a FixturePrograms). */
export function describeCatalogue(lessons, programs) {
  for (const lesson of chosenLessons(lessons)) {
    const fixtures = chosenFixtures(lesson);
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
}
