// The course as the dashboard shows it: lessons in order with the titles of
// their verifier's steps (so a failed step reads as words, not an id). Read
// from the manifest alone: the classroom never loads a verifier or the harness.
import { loadLessons } from '../manifest.js';

export function lessonCatalog() {
  return loadLessons().map((lesson) => ({
    id: lesson.id,
    number: lesson.number,
    title: lesson.title,
    optional: lesson.optional,
    steps: Object.fromEntries(lesson.steps.map((s) => [s.id, s.title])),
  }));
}
