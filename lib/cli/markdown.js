// Lesson text for the terminal: marked + marked-terminal with colour on a
// TTY; the markdown itself, which reads well as plain text, otherwise.
import { colorEnabled } from './style.js';

export async function renderMarkdown(text, io = { stdout: process.stdout, env: process.env }) {
  if (!colorEnabled(io.stdout, io.env)) return text.endsWith('\n') ? text : `${text}\n`;
  const [{ Marked }, { markedTerminal }] = await Promise.all([import('marked'), import('marked-terminal')]);
  const width = Math.min(io.stdout.columns || 80, 100);
  const marked = new Marked(markedTerminal({ width, reflowText: true, tab: 2 }));
  return marked.parse(text);
}
