import { loadLessons } from '../../manifest.js';
import { Progress, workspaceDir } from '../../progress.js';
import { colorEnabled, makeStyle } from '../style.js';
import { begin, defaultLesson } from './start.js';

export const options = { dir: { type: 'string' } };
export const usage = `Usage: cluster-workshop next [--dir <workspace>]

Goes on to the lesson after your current one: copies its starter into the
workspace (keeping a file you already have) and makes it current. Nothing
moves on by itself: passing a lesson only marks it done.`;

export function run(values, positionals, io) {
  const dir = workspaceDir(values.dir, io.env, io.cwd);
  const progress = Progress.load(dir, { create: true });
  const lessons = loadLessons();
  const index = lessons.findIndex((l) => l.id === progress.current);
  const style = makeStyle(colorEnabled(io.stdout, io.env));
  if (index === -1) return begin(defaultLesson(progress), { dir, progress, io, dirFlag: values.dir });
  if (index === lessons.length - 1) {
    io.out(`Lesson ${index + 1} (${lessons[index].id}) is the last one: there is no next lesson.\n`);
    return 0;
  }
  const current = lessons[index];
  if (!progress.isDone(current.id)) {
    io.out(style.yellow(`Lesson ${current.number} (${current.id}) is not passed yet; it stays in your workspace to come back to.\n\n`));
  }
  return begin(lessons[index + 1], { dir, progress, io, dirFlag: values.dir });
}
