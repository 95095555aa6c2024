import { Progress, workspaceDir } from '../../progress.js';
import { beginLesson } from '../../course/begin.js';
import { lessonFrom } from '../lesson-arg.js';
import { UsageError } from '../errors.js';
import { showBegun } from '../begin-view.js';

export const options = { dir: { type: 'string' } };
export const usage = `Usage: cluster-workshop select <lesson> [--dir <workspace>]

Makes a lesson your current one (the one verify, hint and solution use when
no lesson is named), copying its starter into the workspace if it is not there
yet. Your files and your progress in other lessons are kept.

  lesson   number (3) or id (respawn)`;

export function run(values, [name], io) {
  if (name === undefined) throw new UsageError(`Name the lesson to go to, for example: cluster-workshop select 2 (cluster-workshop list shows them).\n\n${usage}`);
  const lesson = lessonFrom(name);
  const dir = workspaceDir(values.dir, io.env, io.cwd);
  const progress = Progress.load(dir, { create: true });
  return showBegun(lesson, beginLesson(lesson, { dir, progress }), { io, dirFlag: values.dir });
}
