// What a learner is told when a lesson begins (start, select, next, watch's
// n key, the menu): the lesson, their file, and the commands to go on with.
// The beginning itself is lib/course/begin.js.
import { DEFAULT_PORT } from '../course/port.js';
import { shownPath } from '../workspace.js';
import { commandLine, quote } from './invocation.js';
import { colorEnabled, makeStyle } from './style.js';

/** Prints what beginLesson did; returns the exit code (0). */
export function showBegun(lesson, begun, { io, dirFlag }) {
  for (const w of begun.warnings) io.err(`warning: ${w}\n`);
  const style = makeStyle(colorEnabled(io.stdout, io.env));
  const file = shownPath(begun.file, io.cwd);
  const cmd = (...args) => commandLine(io, args, { dir: dirFlag });
  const optional = lesson.optional ? style.dim(' (optional)') : '';
  io.out(`${style.bold(`Lesson ${lesson.number}: ${lesson.title}`)}${optional}\n`);
  io.out(`${lesson.summary ? `${lesson.summary}\n` : ''}\n`);
  if (lesson.optional) io.out(style.dim(`This lesson is optional; ${cmd('next')} skips it.\n\n`));
  if (begun.kept) {
    io.out(`Your file:  ${file}\n`);
    io.out(style.dim(`            (already there, kept as it is; to start over: ${cmd('reset', lesson.number)})\n`));
  } else {
    io.out(`Your file:  ${file}  ${style.dim('(the starter: look for // TODO)')}\n`);
  }
  io.out(`
  read the lesson:  ${cmd('print', lesson.number)}
  try it yourself:  cd ${quote(begun.folder)} && PORT=${DEFAULT_PORT} node server.js
  verify it:        ${style.bold(cmd('verify'))}
  stuck?            ${cmd('hint')}
`);
  return 0;
}
