// README.md is what a learner and an engineer read first: its lesson table
// must be the manifest's, in the manifest's order, or it sends people to the
// wrong lesson.
import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { loadLessons, PACKAGE_ROOT } from '../lib/manifest.js';

const readme = readFileSync(join(PACKAGE_ROOT, 'README.md'), 'utf8');

test("README's lesson table lists every lesson of the manifest, in order, with its number, id and title", () => {
  const table = readme.split('## Lessons')[1].split('\n## ')[0];
  const rows = [...table.matchAll(/^\| (\d+) \| `([a-z0-9-]+)` \| (.+?) \|$/gm)].map((m) => ({ number: Number(m[1]), id: m[2], title: m[3] }));
  expect(rows.map(({ number, id }) => ({ number, id }))).toEqual(loadLessons().map(({ number, id }) => ({ number, id })));
  for (const [i, lesson] of loadLessons().entries()) {
    expect(rows[i].title.startsWith(lesson.title)).toBe(true);
    if (lesson.needs?.length) expect(rows[i].title).toMatch(/optional: needs/);
  }
});
