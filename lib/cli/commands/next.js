import { loadLessons } from '../../manifest.js';
import { Progress, workspaceDir } from '../../progress.js';
import { beginLesson } from '../../course/begin.js';
import { defaultLesson, lessonAfter } from '../../course/lessons.js';
import { colorEnabled, makeStyle } from '../style.js';
import { showBegun } from '../begin-view.js';

export const options = { dir: { type: 'string' } };
export const usage = `Usage: cluster-workshop next [--dir <workspace>]

Goes on to the lesson after your current one: copies its starter into the
workspace (keeping a file you already have) and makes it current. Nothing
moves on by itself: passing a lesson only marks it done.`;

export function run(values, positionals, io) {
  const dir = workspaceDir(values.dir, io.env, io.cwd);
  const progress = Progress.load(dir, { create: true });
  const lessons = loadLessons();
  const current = lessons.find((l) => l.id === progress.current);
  const begin = (lesson) => showBegun(lesson, beginLesson(lesson, { dir, progress }), { io, dirFlag: values.dir });
  if (!current) return begin(defaultLesson(progress, lessons));
  const next = lessonAfter(current, lessons);
  if (!next) {
    io.out(`Lesson ${current.number} (${current.id}) is the last one: there is no next lesson.\n`);
    return 0;
  }
  if (!progress.isDone(current.id)) {
    const style = makeStyle(colorEnabled(io.stdout, io.env));
    io.out(style.yellow(`Lesson ${current.number} (${current.id}) is not passed yet; it stays in your workspace to come back to.\n\n`));
  }
  return begin(next);
}
