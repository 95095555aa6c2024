import { lessonFrom, fileFrom } from '../lesson-arg.js';
import { verifyLesson } from '../../course/verify.js';
import { TextReporter, SilentReporter } from '../reporter.js';
import { workspaceDir } from '../../progress.js';
import { colorEnabled } from '../style.js';
import { UsageError } from '../errors.js';
import { onInterrupt } from '../interrupt.js';
import { afterPass } from '../after-pass.js';
import { commandLine } from '../invocation.js';

export const options = { json: { type: 'boolean' }, dir: { type: 'string' }, seed: { type: 'string' } };
export const usage = `Usage: cluster-workshop verify [lesson] [file] [--json] [--dir <workspace>] [--seed <n>]

Starts your program as \`node <file>\` with PORT (and WORKERS where the lesson
uses it), sends it real traffic, kills workers and sends signals as the lesson
says, then tells you which steps held.

  lesson   number (3) or id (respawn); default: your current lesson
  file     your program; default: the lesson's file in your workspace
  --json   print one JSON object instead of the step log:
           { lesson, file, passed, durationMs, steps: [{ name, passed, durationMs, detail }] }
  --seed   replay the capstone's chaos schedule: the seed its log printed
           (a whole number; without it, each run picks a new one)

Exit code: 0 passed, 1 failed, 2 usage error (unknown lesson, missing file),
128+n interrupted by signal n (Ctrl-C: 130).`;

export async function run(values, [name, file], io) {
  const lesson = lessonFrom(name, { dir: values.dir, env: io.env, cwd: io.cwd });
  const path = fileFrom(lesson, file, { dir: values.dir, env: io.env, cwd: io.cwd, tell: values.json ? io.err : io.out });
  const options = values.seed === undefined ? {} : { seed: seedFrom(values.seed) };
  const reporter = values.json
    ? new SilentReporter()
    : new TextReporter({ write: io.out, color: colorEnabled(io.stdout, io.env), live: Boolean(io.stdout?.isTTY) });
  const showVerdict = ({ report }) => {
    if (values.json) io.out(`${JSON.stringify(report, null, 2)}\n`);
    else if (report.passed) io.out(afterPass(lesson, { io, dirFlag: values.dir }));
    else if (!report.interrupted && lesson.hints.length) io.out(`Stuck? ${commandLine(io, ['hint', lesson.number], { dir: values.dir })} shows a hint about the step that failed.\n`);
  };

  const controller = new AbortController();
  const release = onInterrupt((signal) => controller.abort(signal));
  // Once the run is over (the program stopped), Ctrl-C ends the command at once, classroom report or not.
  const onVerdict = (outcome) => {
    release();
    showVerdict(outcome);
  };
  try {
    const dir = workspaceDir(values.dir, io.env, io.cwd);
    const { exitCode } = await verifyLesson({ lesson, file: path, dir, reporter, signal: controller.signal, options, io, onVerdict });
    return exitCode;
  } finally {
    release();
  }
}

function seedFrom(text) {
  if (!/^\d{1,9}$/.test(text.trim())) {
    throw new UsageError(`--seed takes a whole number, such as the one a capstone verify printed (got "${text}").`);
  }
  return Number(text.trim());
}
