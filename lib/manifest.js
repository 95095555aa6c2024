// The course, in order, from lessons/manifest.json. A lesson's id names all of
// its files: lessons/NN-id.md, exercises/NN-id/, solutions/NN-id/ and
// verify/NN-id.js, where NN is its place in the manifest.
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

export const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..');
export const MANIFEST_PATH = join(PACKAGE_ROOT, 'lessons', 'manifest.json');
export const PROGRAM_FILE = 'server.js';

let cached;

export function loadLessons() {
  if (cached) return cached;
  const manifest = JSON.parse(readFileSync(MANIFEST_PATH, 'utf8'));
  cached = manifest.lessons.map((entry, index) => {
    const number = index + 1;
    const slug = `${String(number).padStart(2, '0')}-${entry.id}`;
    return {
      ...entry,
      number,
      slug,
      optional: Boolean(entry.optional),
      hints: entry.hints ?? [],
      paths: {
        text: join(PACKAGE_ROOT, 'lessons', `${slug}.md`),
        exerciseDir: join(PACKAGE_ROOT, 'exercises', slug),
        exercise: join(PACKAGE_ROOT, 'exercises', slug, PROGRAM_FILE),
        solutionDir: join(PACKAGE_ROOT, 'solutions', slug),
        solution: join(PACKAGE_ROOT, 'solutions', slug, PROGRAM_FILE),
        verifier: join(PACKAGE_ROOT, 'verify', `${slug}.js`),
      },
    };
  });
  return cached;
}

/** A lesson by number ("3", 3) or id ("respawn"); undefined when there is none. */
export function findLesson(name) {
  const lessons = loadLessons();
  const text = String(name).trim().toLowerCase();
  if (/^\d+$/.test(text)) return lessons[Number(text) - 1];
  return lessons.find((l) => l.id === text || l.slug === text);
}

export async function loadVerifier(lesson) {
  const mod = await import(pathToFileURL(lesson.paths.verifier).href);
  return mod.default;
}

/** The hints of a lesson, the ones that fit the failed step first. */
export function hintsFor(lesson, failedStepId) {
  const all = lesson.hints.map((h) => (typeof h === 'string' ? { text: h } : h));
  if (!failedStepId) return all;
  const fits = all.filter((h) => h.steps?.includes(failedStepId));
  return [...fits, ...all.filter((h) => !fits.includes(h))];
}
