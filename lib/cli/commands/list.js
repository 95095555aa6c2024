import { loadLessons } from '../../manifest.js';
import { Progress, workspaceDir } from '../../progress.js';

export const options = { dir: { type: 'string' } };
export const usage = `Usage: cluster-workshop list [--dir <workspace>]

Lists the lessons in order with their number, id, title and your status
(done, current, started, not started; optional lessons are marked).`;

export function run(values, positionals, io) {
  const progress = Progress.load(workspaceDir(values.dir, io.env, io.cwd));
  for (const w of progress.warnings) io.err(`warning: ${w}\n`);
  const lessons = loadLessons();
  const idWidth = Math.max(...lessons.map((l) => l.id.length));
  for (const l of lessons) {
    const status = progress.statusOf(l.id);
    const mark = status === 'done' ? '[x]' : status === 'current' ? '[>]' : '[ ]';
    const optional = l.optional ? ' (optional)' : '';
    io.out(`${mark} ${String(l.number).padStart(2)}  ${l.id.padEnd(idWidth)}  ${l.title}${optional}  ${status === 'not started' ? '' : `- ${status}`}`.trimEnd() + '\n');
  }
  return 0;
}
