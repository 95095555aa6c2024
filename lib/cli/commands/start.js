import { Progress, workspaceDir } from '../../progress.js';
import { beginLesson } from '../../course/begin.js';
import { defaultLesson } from '../../course/lessons.js';
import { lessonFrom } from '../lesson-arg.js';
import { showBegun } from '../begin-view.js';

export const options = { dir: { type: 'string' } };
export const usage = `Usage: cluster-workshop start [lesson] [--dir <workspace>]

Copies the lesson's starter into your workspace (./cluster-workshop/<id>/server.js,
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
  return showBegun(lesson, beginLesson(lesson, { dir, progress }), { io, dirFlag: values.dir });
}
