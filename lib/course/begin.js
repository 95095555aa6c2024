// Beginning a lesson: its starter goes into the workspace (a file the learner
// already has is kept), and it becomes the current lesson. What the learner
// is told about it is the CLI's business (lib/cli/begin-view.js).
import { copyStarter, lessonAvailable, lessonFolder } from '../workspace.js';
import { UsageError } from './exit.js';

/**
 * @param {object} lesson from the manifest
 * @param {{ progress: import('../progress.js').Progress, dir: string }} o the workspace and its progress
 * @returns {{ file: string, folder: string, kept: boolean, warnings: string[] }} kept: the file was already there and is left as it is
 */
export function beginLesson(lesson, { dir, progress }) {
  if (!lessonAvailable(lesson)) {
    throw new UsageError(
      `Lesson ${lesson.number} (${lesson.id}) is not in this version of cluster-workshop yet. Update to the latest version: npx cluster-workshop@latest`,
    );
  }
  const copied = copyStarter(dir, lesson);
  progress.markStarted(lesson.id);
  progress.save();
  return {
    file: copied.file,
    folder: lessonFolder(dir, lesson),
    kept: copied.kept.includes(copied.file),
    warnings: [...progress.warnings, ...copied.warnings],
  };
}
