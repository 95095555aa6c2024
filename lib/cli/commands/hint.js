import { Progress, workspaceDir } from '../../progress.js';
import { lessonFrom } from '../lesson-arg.js';
import { showAllHints, showNextHint } from '../hint-view.js';

export const options = { dir: { type: 'string' }, all: { type: 'boolean' } };
export const usage = `Usage: cluster-workshop hint [lesson] [--all] [--dir <workspace>]

Shows the lesson's next hint, one at a time and in order. When your last
verify failed, the hint about the step that failed comes first.

  lesson   number (3) or id (respawn); default: your current lesson
  --all    every hint of the lesson at once`;

export function run(values, [name], io) {
  const lesson = lessonFrom(name, { dir: values.dir, env: io.env, cwd: io.cwd });
  const progress = Progress.load(workspaceDir(values.dir, io.env, io.cwd));
  return (values.all ? showAllHints : showNextHint)(lesson, progress, { io, dirFlag: values.dir });
}
