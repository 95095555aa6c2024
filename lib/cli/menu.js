// `cluster-workshop` with no command. In a terminal: an inquirer menu of the
// lessons with their status, then what to do with the chosen one; every
// action runs the same command a learner could type (so "Verify my program"
// is the verify command: progress recorded, the classroom told). Ctrl-C or
// Esc leaves with exit code 0. Without a terminal (a pipe, CI) it prints the
// lessons and the commands and never waits for input.
//
// main.js hands it what it needs of the CLI: runCommand(args) runs a command
// as if typed and resolves its exit code; helpText is the help screen.
import { emitKeypressEvents } from 'node:readline';
import { loadLessons } from '../manifest.js';
import { Progress, workspaceDir } from '../progress.js';
import { fileState, lessonAvailable, shownPath } from '../workspace.js';
import { defaultLesson, lessonAfter } from '../course/lessons.js';
import { colorEnabled, makeStyle } from './style.js';
import { commandLine } from './invocation.js';

export async function printOverview(io, { runCommand, helpText }) {
  const cmd = (...args) => commandLine(io, args);
  io.out('cluster-workshop: the lessons (no terminal here, so no menu)\n\n');
  await runCommand(['list']);
  io.out(`\n${helpText.split('\n').slice(2).join('\n')}`);
  io.out(`Begin with: ${cmd('start')}, then ${cmd('verify')}. Run ${cmd()} in a terminal for the menu.\n`);
  return 0;
}

const QUIT = Symbol('quit');

export async function runMenu(io, { runCommand }) {
  const { default: inquirer } = await import('inquirer');
  const style = makeStyle(colorEnabled(io.stdout, io.env));
  const dir = workspaceDir(undefined, io.env, io.cwd);
  emitKeypressEvents(process.stdin);

  // One question; resolves QUIT on Ctrl-C (inquirer's ExitPromptError) or Esc.
  async function ask(question) {
    const esc = new AbortController();
    const onKey = (_, key) => {
      if (key?.name === 'escape') esc.abort();
    };
    process.stdin.on('keypress', onKey);
    try {
      const prompt = inquirer.createPromptModule({ signal: esc.signal });
      const { answer } = await prompt([{ name: 'answer', ...question }]);
      return answer;
    } catch (err) {
      if (err?.name === 'ExitPromptError' || err?.name === 'AbortPromptError') return QUIT;
      throw err;
    } finally {
      process.stdin.off('keypress', onKey);
    }
  }

  const run = async (...args) => {
    io.out('\n');
    const code = await runCommand(args);
    io.out('\n');
    return code;
  };

  io.out(
    `${style.bold('cluster-workshop')}: learn Node.js cluster by writing real programs.\n` +
      style.dim(`Workspace: ${shownPath(dir, io.cwd)} · ↑↓ Enter to choose · Esc or Ctrl-C quits\n\n`),
  );

  let lesson = null;
  let lastAction = null;
  for (;;) {
    const progress = Progress.load(dir);
    const lessons = loadLessons();
    if (!lesson) {
      const done = lessons.filter((l) => progress.isDone(l.id)).length;
      const fallback = defaultLesson(progress, lessons);
      const choice = await ask({
        type: 'select',
        message: `Choose a lesson (${done} of ${lessons.length} done)`,
        pageSize: lessons.length + 2,
        loop: false,
        default: fallback?.id,
        choices: [
          ...lessons.map((l) => ({
            value: l.id,
            name: lessonLine(l, progress, io.stdout.columns),
            description: l.summary,
            disabled: lessonAvailable(l) ? false : '(soon)',
          })),
          { value: QUIT, name: 'Quit' },
        ],
      });
      if (choice === QUIT) return bye(io);
      lesson = lessons.find((l) => l.id === choice);
      lastAction = null;
      continue;
    }

    const file = fileState(dir, lesson);
    const next = lessonAfter(lesson, lessons);
    const status = progress.isDone(lesson.id) ? 'done' : file === 'missing' ? 'not started' : 'started';
    const action = await ask({
      type: 'select',
      message: `Lesson ${lesson.number}: ${lesson.title} (${status})`,
      loop: false,
      pageSize: 12,
      default: lastAction ?? (file === 'missing' ? 'start' : 'verify'),
      choices: [
        { value: 'print', name: 'Read the lesson' },
        { value: 'start', name: file === 'missing' ? 'Start it: copy the starter into your workspace' : 'Start it: show my file and the commands' },
        { value: 'verify', name: 'Verify my program', disabled: file === 'missing' ? '(start it first)' : false },
        { value: 'hint', name: 'Get a hint' },
        { value: 'solution', name: 'See the solution' },
        { value: 'reset', name: 'Reset it: start over from the starter', disabled: file === 'missing' ? '(not started)' : false },
        { value: 'next', name: next ? `Next lesson: ${next.number}. ${next.title}` : 'Next lesson', disabled: next && lessonAvailable(next) ? false : '(none yet)' },
        { value: 'back', name: 'Back to the lessons' },
        { value: QUIT, name: 'Quit' },
      ],
    });
    if (action === QUIT) return bye(io);
    if (action === 'back') {
      lesson = null;
      continue;
    }
    if (action === 'next') {
      await run('select', next.number);
      lesson = next;
      lastAction = null;
      continue;
    }
    const code = await run(action, lesson.number);
    // After a pass the natural next move is the next lesson; after a failure, a hint or another try.
    lastAction = action === 'verify' ? (code === 0 && next && lessonAvailable(next) ? 'next' : 'verify') : action === 'start' || action === 'reset' ? 'verify' : action;
  }
}

// One line per lesson even at 80 columns: the title gives way, the status never does.
function lessonLine(lesson, progress, columns = 80) {
  const status = progress.statusOf(lesson.id);
  const mark = status === 'done' ? '✔' : status === 'current' ? '▶' : status === 'started' ? '•' : ' ';
  const optional = lesson.optional ? ' (optional)' : '';
  const label = status === 'not started' ? '' : `  [${status}]`;
  const room = Math.max(20, Math.min(columns || 80, 120) - 16 - optional.length - label.length);
  const title = lesson.title.length > room ? `${lesson.title.slice(0, room - 1)}…` : lesson.title;
  return `${mark} ${String(lesson.number).padStart(2)}. ${title}${optional}${label}`;
}

function bye(io) {
  io.out(`Bye. Your work stays in your workspace; run ${commandLine(io, [])} again to go on.\n`);
  return 0;
}
