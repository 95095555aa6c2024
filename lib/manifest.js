// The course, in order, from lessons/manifest.json. A lesson's id names all of
// its files: lessons/<id>.md, exercises/<id>/, solutions/<id>/ and
// verify/<id>.js (and the learner's workspace folder <id>/). Its number is its
// place in the manifest, for display only: reordering the course renames
// nothing, and a learner's progress is kept by id.
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
    const { id } = entry;
    return {
      ...entry,
      number,
      // The folder name that workspaces made before lessons were named by id used.
      legacyFolder: `${String(number).padStart(2, '0')}-${id}`,
      optional: Boolean(entry.optional),
      hints: entry.hints ?? [],
      // The packages a learner's program of this lesson may import without a
      // node_modules of its own (the harness makes them resolvable).
      packages: entry.packages ?? [],
      // What `bench` loads for this lesson ({ route }), or null when it has
      // nothing worth benching (it needs Redis; it routes by client address).
      bench: entry.bench ?? null,
      steps: entry.steps ?? [],
      paths: {
        text: join(PACKAGE_ROOT, 'lessons', `${id}.md`),
        exerciseDir: join(PACKAGE_ROOT, 'exercises', id),
        exercise: join(PACKAGE_ROOT, 'exercises', id, PROGRAM_FILE),
        solutionDir: join(PACKAGE_ROOT, 'solutions', id),
        solution: join(PACKAGE_ROOT, 'solutions', id, PROGRAM_FILE),
        verifier: join(PACKAGE_ROOT, 'verify', `${id}.js`),
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
  return lessons.find((l) => l.id === text || l.legacyFolder === text);
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
