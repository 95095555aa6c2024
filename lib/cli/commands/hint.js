import { hintsFor } from '../../manifest.js';
import { Progress, workspaceDir } from '../../progress.js';
import { lessonFrom } from '../lesson-arg.js';
import { commandLine } from '../invocation.js';
import { colorEnabled, makeStyle } from '../style.js';

export const options = { dir: { type: 'string' }, all: { type: 'boolean' } };
export const usage = `Usage: cluster-workshop hint [lesson] [--all] [--dir <workspace>]

Shows the lesson's next hint, one at a time and in order. When your last
verify failed, the hint about the step that failed comes first.

  lesson   number (3) or id (respawn); default: your current lesson
  --all    every hint of the lesson at once`;

export function run(values, [name], io) {
  const dir = workspaceDir(values.dir, io.env, io.cwd);
  const lesson = lessonFrom(name, { dir: values.dir, env: io.env, cwd: io.cwd });
  const progress = Progress.load(dir);
  const style = makeStyle(colorEnabled(io.stdout, io.env));
  const cmd = (...args) => commandLine(io, args, { dir: values.dir });
  const failedStep = progress.lastFailedStep(lesson.id);
  const hints = hintsFor(lesson, failedStep);
  const heading = `lesson ${lesson.number} (${lesson.id})`;
  if (hints.length === 0) {
    io.out(`There are no hints for ${heading}. Read the lesson again (${cmd('print', lesson.number)}); the verify message says what to change.\n`);
    return 0;
  }
  if (values.all) {
    io.out(style.bold(`All ${hints.length} hints for ${heading}:\n`));
    hints.forEach((h, i) => io.out(`  ${i + 1}. ${h.text}\n`));
    return 0;
  }
  let shown = progress.hintsShown(lesson.id).filter((t) => hints.some((h) => h.text === t));
  if (shown.length >= hints.length) {
    io.out(style.dim(`You have seen all ${hints.length} hints for ${heading}; here they come again from the first.\n`));
    progress.clearHints(lesson.id);
    shown = [];
  }
  const hint = hints.find((h) => !shown.includes(h.text));
  const about = failedStep && hint.steps?.includes(failedStep) ? style.dim(` (about the step your last verify failed at: ${failedStep})`) : '';
  io.out(`${style.bold(`Hint ${shown.length + 1} of ${hints.length}`)} for ${heading}${about}:\n\n  ${hint.text}\n\n`);
  const more = shown.length + 1 < hints.length ? `next hint: ${cmd('hint')}` : 'that was the last hint';
  io.out(style.dim(`${more} · all at once: ${cmd('hint', '--all')} · the solution: ${cmd('solution', lesson.number)}\n`));
  progress.recordHint(lesson.id, hint.text);
  progress.save();
  for (const w of progress.warnings) io.err(`warning: ${w}\n`);
  return 0;
}
