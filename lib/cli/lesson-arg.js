// Turning the [lesson] and [file] arguments into a lesson and a path, with
// messages that say what to type instead.
import { existsSync, statSync } from 'node:fs';
import { resolve } from 'node:path';
import { findLesson, loadLessons } from '../manifest.js';
import { UsageError } from './errors.js';
import { Progress, workspaceDir } from '../progress.js';
import { lessonFile } from '../workspace.js';
import { cliName } from '../invocation.js';

export function lessonFrom(name, { dir, env = process.env, cwd = process.cwd() } = {}) {
  if (name === undefined) {
    const progress = Progress.load(workspaceDir(dir, env, cwd));
    const current = progress.state.current && findLesson(progress.state.current);
    if (current) return current;
    throw new UsageError(
      `You have no current lesson yet: start one with \`${cliName()} start\` (lesson 1), or name a lesson by number or id, for example: ${cliName()} verify 1 server.js (${cliName()} list shows them).`,
    );
  }
  const lesson = findLesson(name);
  if (!lesson) {
    const ids = loadLessons().map((l) => `${l.number} ${l.id}`).join(', ');
    throw new UsageError(`There is no lesson "${name}". The lessons are: ${ids}.`);
  }
  return lesson;
}

/** The learner's file for a lesson: the given path, else the workspace's copy. */
export function fileFrom(lesson, file, { dir, env = process.env, cwd = process.cwd() } = {}) {
  const path = file !== undefined ? resolve(cwd, file) : lessonFile(workspaceDir(dir, env, cwd), lesson);
  if (!existsSync(path)) {
    throw new UsageError(
      file !== undefined
        ? `There is no file at ${path}. Give the path of your program, for example: ${cliName()} verify ${lesson.id} server.js`
        : `No file given and none in the workspace (${path}). Put the starter there with \`${cliName()} start ${lesson.number}\`, or give the path of your program: ${cliName()} verify ${lesson.id} <file>`,
    );
  }
  if (!statSync(path).isFile()) throw new UsageError(`${path} is a folder; give the path of your program's .js file.`);
  return path;
}
