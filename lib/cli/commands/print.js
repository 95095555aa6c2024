import { readFileSync } from 'node:fs';
import { lessonFrom } from '../lesson-arg.js';
import { renderMarkdown } from '../markdown.js';

export const options = { dir: { type: 'string' } };
export const usage = `Usage: cluster-workshop print [lesson] [--dir <workspace>]

Shows the lesson text (the current lesson when none is named). Rendered for
the terminal; plain text when the output is not a terminal or NO_COLOR is set.`;

export async function run(values, [name], io) {
  const lesson = lessonFrom(name, values);
  const text = readFileSync(lesson.paths.text, 'utf8');
  io.out(await renderMarkdown(text, io));
  return 0;
}
