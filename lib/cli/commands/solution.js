import { existsSync } from 'node:fs';
import { UsageError } from '../errors.js';
import { Progress, workspaceDir } from '../../progress.js';
import { lessonFrom } from '../lesson-arg.js';
import { commandLine } from '../invocation.js';
import { confirm } from '../ask.js';
import { colorEnabled, makeStyle } from '../style.js';
import { solutionView } from '../solution-view.js';

export const options = { dir: { type: 'string' }, yes: { type: 'boolean', short: 'y' } };
export const usage = `Usage: cluster-workshop solution [lesson] [--yes] [--dir <workspace>]

Shows the lesson's reference solution, with the lines it adds to the starter
marked. For a lesson you have not passed yet it asks first; without a
terminal it shows it only with --yes.

  lesson   number (3) or id (respawn); default: your current lesson
  --yes    show it without asking`;

export async function run(values, [name], io) {
  const dir = workspaceDir(values.dir, io.env, io.cwd);
  const lesson = lessonFrom(name, { dir: values.dir, env: io.env, cwd: io.cwd });
  if (!existsSync(lesson.paths.solution)) {
    throw new UsageError(`Lesson ${lesson.number} (${lesson.id}) has no solution in this version of cluster-workshop yet. Update to the latest version: npx cluster-workshop@latest`);
  }
  const progress = Progress.load(dir);
  const cmd = (...args) => commandLine(io, args, { dir: values.dir });
  if (!progress.isDone(lesson.id) && !values.yes) {
    const ok = await confirm(io, `You have not passed lesson ${lesson.number} (${lesson.id}) yet. Show its solution anyway?`, {
      command: cmd('solution', lesson.number, '--yes'),
    });
    if (!ok) {
      io.out(`Not shown. A hint may be enough: ${cmd('hint', lesson.number)}\n`);
      return 0;
    }
  }
  const style = makeStyle(colorEnabled(io.stdout, io.env));
  io.out(solutionView(lesson, style));
  progress.recordSolutionSeen(lesson.id);
  progress.save();
  for (const w of progress.warnings) io.err(`warning: ${w}\n`);
  return 0;
}
