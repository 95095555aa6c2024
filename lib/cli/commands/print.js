import { readFileSync } from 'node:fs';
import { lessonFrom } from '../lesson-arg.js';
import { renderMarkdown } from '../markdown.js';
import { renderCommands } from '../invocation.js';
import { quote } from '../../invocation.js';
import { workspaceDir } from '../../progress.js';
import { lessonFolder } from '../../workspace.js';
import { page } from '../pager.js';

export const options = { dir: { type: 'string' } };
export const usage = `Usage: cluster-workshop print [lesson] [--dir <workspace>]

Shows the lesson text (the current lesson when none is named). In a terminal:
rendered, through $PAGER (else less -R, else a built-in pager) when it is
longer than the screen; plain text when the output is not a terminal or
NO_COLOR is set.`;

/**
 * The lesson text as this learner should read it: its commands in the form
 * that works for the way they started the CLI ({{cli}}), and the number of
 * hints the manifest has for it ({{hint-count}}: the hints themselves are
 * given one at a time by the hint command, never printed with the text).
 */
export function lessonText(lesson, io, { dir } = {}) {
  const text = readFileSync(lesson.paths.text, 'utf8');
  // The "try it by hand" blocks begin with a cd to the lesson's folder
  // ({{lesson-folder}}) or the workspace ({{workspace}}), written out whole,
  // so they paste in any folder (the workspace is where it will be made,
  // before the first start).
  const workspace = workspaceDir(dir, io.env, io.cwd);
  return renderCommands(text, io)
    .replaceAll('{{hint-count}}', String(lesson.hints.length))
    .replaceAll('{{lesson-folder}}', quote(lessonFolder(workspace, lesson)))
    .replaceAll('{{workspace}}', quote(workspace));
}

export async function run(values, [name], io) {
  const lesson = lessonFrom(name, { dir: values.dir, env: io.env, cwd: io.cwd });
  await page(await renderMarkdown(lessonText(lesson, io, { dir: values.dir }), io), io);
  return 0;
}
