// Showing a lesson's hints (the hint command, watch's h key). Which hint
// comes next, and recording it, is lib/course/hints.js.
import { allHints, nextHint } from '../course/hints.js';
import { commandLine } from './invocation.js';
import { colorEnabled, makeStyle } from './style.js';

function view(lesson, { io, dirFlag }) {
  const style = makeStyle(colorEnabled(io.stdout, io.env));
  const cmd = (...args) => commandLine(io, args, { dir: dirFlag });
  const heading = `lesson ${lesson.number} (${lesson.id})`;
  const none = () => io.out(`There are no hints for ${heading}. Read the lesson again (${cmd('print', lesson.number)}); the verify message says what to change.\n`);
  return { style, cmd, heading, none };
}

/** Picks, records and prints the next hint; returns the exit code (0). */
export function showNextHint(lesson, progress, { io, dirFlag }) {
  const { style, cmd, heading, none } = view(lesson, { io, dirFlag });
  const next = nextHint(lesson, progress);
  if (!next) {
    none();
    return 0;
  }
  if (next.startedOver) io.out(style.dim(`You have seen all ${next.total} hints for ${heading}; here they come again from the first.\n`));
  const about = next.aboutFailedStep ? style.dim(` (about the step your last verify failed at: ${next.failedStep})`) : '';
  io.out(`${style.bold(`Hint ${next.number} of ${next.total}`)} for ${heading}${about}:\n\n  ${next.hint.text}\n\n`);
  const more = next.number < next.total ? `next hint: ${cmd('hint')}` : 'that was the last hint';
  io.out(style.dim(`${more} · all at once: ${cmd('hint', '--all')} · the solution: ${cmd('solution', lesson.number)}\n`));
  for (const w of next.warnings) io.err(`warning: ${w}\n`);
  return 0;
}

/** Prints every hint of the lesson at once (nothing recorded); returns the exit code (0). */
export function showAllHints(lesson, progress, { io, dirFlag }) {
  const { style, heading, none } = view(lesson, { io, dirFlag });
  const hints = allHints(lesson, progress);
  if (hints.length === 0) {
    none();
    return 0;
  }
  io.out(style.bold(`All ${hints.length} hints for ${heading}:\n`));
  hints.forEach((h, i) => io.out(`  ${i + 1}. ${h.text}\n`));
  return 0;
}
