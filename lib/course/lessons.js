// Which lesson a command means when none is named, and which comes next.
// The manifest's order is the course's order.
import { loadLessons } from '../manifest.js';
import { lessonAvailable } from '../workspace.js';

/** The current lesson, else the first one not done (of this version), else the last. */
export function defaultLesson(progress, lessons = loadLessons()) {
  return (
    lessons.find((l) => l.id === progress.current) ??
    lessons.find((l) => !progress.isDone(l.id) && lessonAvailable(l)) ??
    lessons[lessons.length - 1]
  );
}

/** The lesson after this one in the course, or undefined after the last. */
export function lessonAfter(lesson, lessons = loadLessons()) {
  const index = lessons.findIndex((l) => l.id === lesson.id);
  return index === -1 ? undefined : lessons[index + 1];
}
