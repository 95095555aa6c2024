// Texts name lessons by id or title, never by number alone: a lesson added
// or moved renumbers every lesson after it, and "as in lessons 4, 5 and 7"
// went on naming lessons that had moved. (A number beside the id, as in
// "lesson 13 (process-manager)", made from the manifest, stays true.)
// lib/harness is left for the pass that re-stresses every lesson: its
// sentences are part of every verdict's fingerprint.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join, relative } from 'node:path';
import { ROOT } from './helpers/cli.js';

const NUMBERED = /\blessons? \d+\b|\blesson-\d+\b/gi;
const SCANNED = ['README.md', 'lessons', 'exercises', 'solutions', 'verify', 'lib/cli', 'lib/course', 'lib/manifest.js', 'lib/workspace.js', 'lib/progress.js'];

function files(path) {
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path, { withFileTypes: true }).filter((e) => e.name !== 'node_modules').flatMap((e) => files(join(path, e.name)));
}

test('no text names a lesson by its number alone', () => {
  const found = [];
  for (const file of SCANNED.flatMap((p) => files(join(ROOT, p)))) {
    readFileSync(file, 'utf8').split('\n').forEach((line, i) => {
      for (const [match] of line.matchAll(NUMBERED)) found.push(`${relative(ROOT, file)}:${i + 1}: ${match}`);
    });
  }
  expect(found).toEqual([]);
});
