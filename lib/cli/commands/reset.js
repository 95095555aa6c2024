import { existsSync } from 'node:fs';
import { loadLessons } from '../../manifest.js';
import { Progress, workspaceDir } from '../../progress.js';
import { copyStarter, fileState, lessonAvailable, lessonFile, shownPath } from '../../workspace.js';
import { lessonFrom } from '../lesson-arg.js';
import { commandLine } from '../invocation.js';
import { confirm } from '../ask.js';
import { UsageError } from '../errors.js';

export const options = { dir: { type: 'string' }, all: { type: 'boolean' }, yes: { type: 'boolean', short: 'y' } };
export const usage = `Usage: cluster-workshop reset [lesson] [--yes] [--dir <workspace>]
       cluster-workshop reset --all [--yes] [--dir <workspace>]

Starts a lesson over: its file goes back to the starter and its progress
(done, attempts, hints seen) is cleared. With --all, the whole course starts
over. It asks first when that would discard an edited file or a passed
lesson; your edited file is kept beside it as server.js.bak.

  lesson   number (3) or id (respawn); default: your current lesson
  --all    every lesson, and the progress file
  --yes    do it without asking (for scripts; required without a terminal)`;

export async function run(values, [name], io) {
  if (values.all && name !== undefined) throw new UsageError(`Give a lesson or --all, not both.\n\n${usage}`);
  const dir = workspaceDir(values.dir, io.env, io.cwd);
  const cmd = (...args) => commandLine(io, args, { dir: values.dir });
  if (!existsSync(dir)) {
    io.out(`There is no workspace at ${shownPath(dir, io.cwd)}, so there is nothing to reset. Begin with: ${cmd('start')}\n`);
    return 0;
  }
  const progress = Progress.load(dir);
  for (const w of progress.warnings) io.err(`warning: ${w}\n`);
  return values.all ? resetAll({ dir, progress, io, values, cmd }) : resetOne({ dir, progress, io, values, cmd, name });
}

async function resetOne({ dir, progress, io, values, cmd, name }) {
  const lesson = lessonFrom(name, { dir: values.dir, env: io.env, cwd: io.cwd });
  if (!lessonAvailable(lesson)) throw new UsageError(`Lesson ${lesson.number} (${lesson.id}) is not in this version of cluster-workshop yet.`);
  const edited = fileState(dir, lesson) === 'edited';
  const done = progress.isDone(lesson.id);
  if ((edited || done) && !values.yes) {
    const what = [edited && `your edits to ${shownPath(lessonFile(dir, lesson), io.cwd)}`, done && 'its "done" mark'].filter(Boolean).join(' and ');
    const ok = await confirm(io, `Start lesson ${lesson.number} (${lesson.id}) over? This replaces ${what}.`, { command: cmd('reset', lesson.number, '--yes') });
    if (!ok) {
      io.out('Nothing changed.\n');
      return 0;
    }
  }
  const result = copyStarter(dir, lesson, { overwrite: true });
  progress.resetLesson(lesson.id);
  progress.save();
  for (const w of [...result.warnings, ...progress.warnings]) io.err(`warning: ${w}\n`);
  io.out(`Lesson ${lesson.number} (${lesson.id}) starts over: ${shownPath(result.file, io.cwd)} is the starter again.\n`);
  for (const b of result.backups) io.out(`Your previous version is in ${shownPath(b, io.cwd)}.\n`);
  io.out(`Verify it with: ${cmd('verify')}\n`);
  return 0;
}

async function resetAll({ dir, progress, io, values, cmd }) {
  const lessons = loadLessons().filter(lessonAvailable);
  const started = lessons.filter((l) => fileState(dir, l) !== 'missing');
  const edited = started.filter((l) => fileState(dir, l) === 'edited');
  const done = lessons.filter((l) => progress.isDone(l.id));
  if ((edited.length || done.length) && !values.yes) {
    const ok = await confirm(
      io,
      `Start the whole course over? This replaces your edits in ${edited.length} lesson file(s) and clears ${done.length} passed lesson(s).`,
      { command: cmd('reset', '--all', '--yes') },
    );
    if (!ok) {
      io.out('Nothing changed.\n');
      return 0;
    }
  }
  const backups = [];
  for (const lesson of started) backups.push(...copyStarter(dir, lesson, { overwrite: true }).backups);
  progress.resetAll();
  progress.save();
  io.out(`The course starts over: ${started.length} lesson file(s) are starters again and your progress is cleared.\n`);
  if (backups.length) io.out(`Your previous versions are kept as server.js.bak beside each file (${backups.length}).\n`);
  io.out(`Begin with: ${cmd('start', 1)}\n`);
  return 0;
}
