// The fixture catalogue (test/catalogue.js) of the lessons whose verifiers
// wait on PM2 and nginx: in a file of its own so that `npm test` can run it
// beside the rest of the suite (scripts/test.js).
import { loadLessons } from '../lib/manifest.js';
import { FixturePrograms } from './helpers/fixtures.js';
import { describeCatalogue, DAEMON_LESSONS } from './catalogue.js';

const programs = new FixturePrograms();
afterAll(() => programs.cleanup());

const lessons = loadLessons().filter((l) => DAEMON_LESSONS.includes(l.id));
test('the daemon lessons are in the manifest', () => {
  expect(lessons.map((l) => l.id).sort()).toEqual([...DAEMON_LESSONS].sort());
});
describeCatalogue(lessons, programs);
