// What a learner sees after a lesson passes: what the reference solution
// adds (its code lines, short; the solution command shows the whole file),
// and how to go on. Nothing moves on by itself.
import { lessonAfter } from '../course/lessons.js';
import { lessonAvailable } from '../workspace.js';
import { commandLine } from './invocation.js';
import { colorEnabled, makeStyle } from './style.js';
import { passView } from './solution-view.js';

export function afterPass(lesson, { io, dirFlag }) {
  const style = makeStyle(colorEnabled(io.stdout, io.env));
  const cmd = (...args) => commandLine(io, args, { dir: dirFlag });
  const next = lessonAfter(lesson);
  const out = [''];
  out.push(style.green(style.bold(`Lesson ${lesson.number} (${lesson.id}) is done.`)) + ' Compare your program with the reference before you go on.');
  out.push('');
  out.push(passView(lesson, style, { showCommand: cmd('solution', lesson.number) }));
  if (!next) {
    out.push(style.bold('That was the last lesson: you have finished the course.') + ` ${cmd('list')} shows what you did.`);
  } else if (!lessonAvailable(next)) {
    out.push(`Lesson ${next.number} (${next.id}) is not in this version yet: update with npx cluster-workshop@latest.`);
  } else {
    out.push(`${style.bold('Go on')} when you are ready: ${style.bold(cmd('next'))}  ${style.dim(`(lesson ${next.number}: ${next.title}${next.optional ? ', optional' : ''})`)}`);
  }
  return `${out.join('\n')}\n`;
}
