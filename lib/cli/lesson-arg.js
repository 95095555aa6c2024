// Turning the [lesson] and [file] arguments into a lesson and a path, with
// messages that say what to type instead.
import { existsSync, statSync } from 'node:fs';
import { isAbsolute, join, resolve } from 'node:path';
import { findLesson, loadLessons } from '../manifest.js';
import { UsageError } from './errors.js';
import { Progress, workspaceDir } from '../progress.js';
import { lessonFile, lessonFolder } from '../workspace.js';
import { cliName } from '../invocation.js';

export function lessonFrom(name, { dir, env = process.env, cwd = process.cwd() } = {}) {
  if (name === undefined) {
    const progress = Progress.load(workspaceDir(dir, env, cwd));
    const current = progress.state.current && findLesson(progress.state.current);
    if (current) return current;
    throw new UsageError(
      `You have no current lesson yet: start one with \`${cliName()} start\` (the first lesson), or name a lesson by number or id, for example: ${cliName()} verify 1 server.js (${cliName()} list shows them).`,
    );
  }
  const lesson = findLesson(name);
  if (!lesson) {
    const ids = loadLessons().map((l) => `${l.number} ${l.id}`).join(', ');
    throw new UsageError(`There is no lesson "${name}". The lessons are: ${ids}.`);
  }
  return lesson;
}

/**
 * The learner's file for a lesson: the given path, else the workspace's copy.
 * A relative path that is not where the learner is, but is in the lesson's
 * folder of the workspace, is that one: a learner types `verify <id>
 * server.js` in the workspace's top folder too (the lesson texts print
 * `verify <id>`, with no file, which works in any folder).
 * `tell` hears which file was taken then, so the learner is never left to
 * guess; `command` names the command in the messages (verify, run, bench).
 */
export function fileFrom(lesson, file, { dir, env = process.env, cwd = process.cwd(), command = 'verify', tell = () => {} } = {}) {
  const workspace = workspaceDir(dir, env, cwd);
  if (file === undefined) {
    const path = lessonFile(workspace, lesson);
    if (!existsSync(path)) {
      throw new UsageError(
        `No file given and none in the workspace (${path}). Put the starter there with \`${cliName()} start ${lesson.id}\`, or give the path of your program: ${cliName()} ${command} ${lesson.id} <file>`,
      );
    }
    return regularFile(path);
  }
  const path = resolve(cwd, file);
  if (existsSync(path)) return regularFile(path);
  const inLesson = isAbsolute(file) ? undefined : join(lessonFolder(workspace, lesson), file);
  if (inLesson && existsSync(inLesson)) {
    tell(`${file} is not in ${resolve(cwd)}: taking the ${lesson.id} lesson's ${inLesson}\n`);
    return regularFile(inLesson);
  }
  const looked = inLesson ? `, nor in the ${lesson.id} lesson's folder of your workspace (${inLesson})` : '';
  const own = lessonFile(workspace, lesson);
  const instead = existsSync(own)
    ? `your workspace's file for this lesson is ${own}: \`${cliName()} ${command === 'bench' ? `bench --lesson ${lesson.id}` : `${command} ${lesson.id}`}\` with no file takes it`
    : `\`${cliName()} start ${lesson.id}\` puts the lesson's starter in ${own}`;
  throw new UsageError(`There is no file at ${path}${looked}. Give your program's path from this folder, or an absolute one; ${instead}.`);
}

function regularFile(path) {
  if (!statSync(path).isFile()) throw new UsageError(`${path} is a folder; give the path of your program's .js file.`);
  return path;
}
