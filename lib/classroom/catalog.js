// The course as the dashboard shows it: lessons in order with the titles of
// their verifier's steps (so a failed step reads as words, not an id).
import { existsSync } from 'node:fs';
import { loadLessons, loadVerifier } from '../manifest.js';
import { bootStep } from '../harness/runner.js';

export async function lessonCatalog() {
  const out = [];
  for (const lesson of loadLessons()) {
    const steps = { [bootStep.id]: bootStep.title };
    if (existsSync(lesson.paths.verifier)) {
      try {
        const verifier = await loadVerifier(lesson);
        for (const s of verifier.steps ?? []) steps[s.id] = s.title;
      } catch {
        // A verifier that does not load still has its lesson on the grid; steps show as ids.
      }
    }
    out.push({ id: lesson.id, number: lesson.number, title: lesson.title, optional: lesson.optional, steps });
  }
  return out;
}
