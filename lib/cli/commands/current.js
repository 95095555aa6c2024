import { existsSync } from 'node:fs';
import { findLesson } from '../../manifest.js';
import { Progress, workspaceDir } from '../../progress.js';
import { lessonFile, shownPath } from '../../workspace.js';
import { commandLine } from '../invocation.js';

export const options = { dir: { type: 'string' } };
export const usage = `Usage: cluster-workshop current [--dir <workspace>]

Shows your current lesson (the one verify, hint and solution use when no
lesson is named), its status, your file, and the commands to go on.`;

export function run(values, positionals, io) {
  const dir = workspaceDir(values.dir, io.env, io.cwd);
  const progress = Progress.load(dir);
  for (const w of progress.warnings) io.err(`warning: ${w}\n`);
  const cmd = (...args) => commandLine(io, args, { dir: values.dir });
  const lesson = progress.current && findLesson(progress.current);
  if (!lesson) {
    io.out(`No lesson started yet in ${shownPath(dir, io.cwd)}. Begin with: ${cmd('start')}\n`);
    return 0;
  }
  const state = progress.lesson(lesson.id);
  const file = lessonFile(dir, lesson);
  const status = progress.isDone(lesson.id) ? 'done' : state.attempts ? `started, ${state.attempts} verify run${state.attempts === 1 ? '' : 's'}` : 'started';
  const last = state.lastVerify && !state.lastVerify.passed ? ` (last verify failed at "${state.lastVerify.failedStep}")` : '';
  io.out(`Lesson ${lesson.number} (${lesson.id}): ${lesson.title}\n`);
  io.out(`status:  ${status}${last}\n`);
  io.out(`file:    ${shownPath(file, io.cwd)}${existsSync(file) ? '' : `  (missing: ${cmd('start', lesson.number)} puts the starter back)`}\n`);
  io.out(`verify:  ${cmd('verify')}\n`);
  io.out(progress.isDone(lesson.id) ? `next:    ${cmd('next')}\n` : `hint:    ${cmd('hint')}\n`);
  return 0;
}
