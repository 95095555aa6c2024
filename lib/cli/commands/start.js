import { loadLessons } from '../../manifest.js';
import { Progress, workspaceDir } from '../../progress.js';
import { copyStarter, lessonAvailable, shownPath, lessonFolder } from '../../workspace.js';
import { lessonFrom } from '../lesson-arg.js';
import { commandLine, quote } from '../invocation.js';
import { UsageError } from '../errors.js';
import { colorEnabled, makeStyle } from '../style.js';

export const options = { dir: { type: 'string' } };
export const usage = `Usage: cluster-workshop start [lesson] [--dir <workspace>]

Copies the lesson's starter into your workspace (./cluster-workshop/NN-id/server.js,
or the folder given with --dir), makes it your current lesson, and prints the
path and the command that verifies it. A file you already have is never
overwritten: \`cluster-workshop reset <lesson>\` starts it over.

  lesson   number (3) or id (respawn); default: your current lesson, else the first not done

The workspace gets a package.json ("type": "module") and links to express,
so \`node server.js\` works there as it does under verify.`;

export function run(values, [name], io) {
  const dir = workspaceDir(values.dir, io.env, io.cwd);
  const progress = Progress.load(dir, { create: true });
  const lesson = name !== undefined ? lessonFrom(name) : defaultLesson(progress);
  return begin(lesson, { dir, progress, io, dirFlag: values.dir });
}

/** The current lesson, else the first one not done, else the last. */
export function defaultLesson(progress) {
  const lessons = loadLessons();
  return (
    lessons.find((l) => l.id === progress.current) ??
    lessons.find((l) => !progress.isDone(l.id) && lessonAvailable(l)) ??
    lessons[lessons.length - 1]
  );
}

/**
 * Puts a lesson's starter in the workspace (keeping any file already there),
 * makes it current, and says where it is and what to run. Shared by start,
 * select, next and the menu.
 */
export function begin(lesson, { dir, progress, io, dirFlag }) {
  if (!lessonAvailable(lesson)) {
    throw new UsageError(
      `Lesson ${lesson.number} (${lesson.id}) is not in this version of cluster-workshop yet. Update to the latest version: npx cluster-workshop@latest`,
    );
  }
  const style = makeStyle(colorEnabled(io.stdout, io.env));
  const result = copyStarter(dir, lesson);
  progress.markStarted(lesson.id);
  progress.save();
  for (const w of [...progress.warnings, ...result.warnings]) io.err(`warning: ${w}\n`);

  const file = shownPath(result.file, io.cwd);
  const edited = result.kept.includes(result.file);
  const cmd = (...args) => commandLine(io, args, { dir: dirFlag });
  const optional = lesson.optional ? style.dim(' (optional)') : '';
  io.out(`${style.bold(`Lesson ${lesson.number}: ${lesson.title}`)}${optional}\n`);
  io.out(`${lesson.summary ? `${lesson.summary}\n` : ''}\n`);
  if (lesson.optional) io.out(style.dim(`This lesson is optional; ${cmd('next')} skips it.\n\n`));
  if (edited) {
    io.out(`Your file:  ${file}\n`);
    io.out(style.dim(`            (already there, kept as it is; to start over: ${cmd('reset', lesson.number)})\n`));
  } else {
    io.out(`Your file:  ${file}  ${style.dim('(the starter: look for // TODO)')}\n`);
  }
  io.out(`
  read the lesson:  ${cmd('print', lesson.number)}
  try it yourself:  cd ${quote(shownPath(lessonFolder(dir, lesson), io.cwd))} && PORT=3000 node server.js
  verify it:        ${style.bold(cmd('verify'))}
  stuck?            ${cmd('hint')}
`);
  return 0;
}
