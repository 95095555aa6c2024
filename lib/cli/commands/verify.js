import { lessonFrom, fileFrom } from '../lesson-arg.js';
import { loadVerifier } from '../../manifest.js';
import { runVerifier } from '../../harness/runner.js';
import { TextReporter, SilentReporter } from '../../harness/reporter.js';
import { Progress, workspaceDir } from '../../progress.js';
import { colorEnabled } from '../style.js';
import { EXIT, UsageError } from '../errors.js';
import { onInterrupt } from '../interrupt.js';
import { afterPass } from '../after-pass.js';
import { commandLine } from '../invocation.js';
import { prepareWorkspace } from '../../workspace.js';
import { existsSync } from 'node:fs';
import { relative, isAbsolute } from 'node:path';

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

Exit code: 0 passed, 1 failed, 2 usage error (unknown lesson, missing file).`;

export async function run(values, [name, file], io) {
  const lesson = lessonFrom(name, { dir: values.dir, env: io.env, cwd: io.cwd });
  const path = fileFrom(lesson, file, { dir: values.dir, cwd: io.cwd });
  const verifier = await loadVerifier(lesson);
  const runOptions = values.seed === undefined ? {} : { seed: seedFrom(values.seed) };
  const dir = workspaceDir(values.dir, io.env, io.cwd);
  const progress = Progress.load(dir);
  const reporter = values.json
    ? new SilentReporter()
    : new TextReporter({ write: io.out, color: colorEnabled(io.stdout, io.env), live: Boolean(io.stdout?.isTTY) });
  // A file in the workspace: re-point its links to express (npx's folder may be gone) so `node server.js` works there too.
  const rel = relative(dir, path);
  if (existsSync(dir) && !rel.startsWith('..') && !isAbsolute(rel)) for (const w of prepareWorkspace(dir)) io.err(`warning: ${w}\n`);

  const controller = new AbortController();
  const release = onInterrupt((signal) => controller.abort(signal));
  let report;
  try {
    report = await runVerifier({ lesson, file: path, verifier, reporter, store: progress.measurements(), signal: controller.signal, options: runOptions });
  } finally {
    release();
  }

  if (!report.interrupted) {
    progress.recordVerify(lesson.id, report);
    progress.save();
  }
  for (const w of progress.warnings) io.err(`warning: ${w}\n`);
  if (values.json) io.out(`${JSON.stringify(report, null, 2)}\n`);
  else if (report.passed) io.out(afterPass(lesson, { io, dirFlag: values.dir }));
  else if (!report.interrupted && lesson.hints.length) io.out(`Stuck? ${commandLine(io, ['hint', lesson.number], { dir: values.dir })} shows a hint about the step that failed.\n`);
  // Classroom mode (after `join`): send the outcome to the instructor. Bounded
  // to about a second, never throws, queues when unreachable, exit code unchanged.
  if (!report.interrupted) {
    await import('../../classroom/client.js')
      .then((m) => m.reportVerify({ lesson: lesson.id, report, attempts: progress.lesson(lesson.id).attempts, dir: values.dir, io }))
      .catch(() => {});
  }
  if (report.interrupted) return 128 + ({ SIGHUP: 1, SIGINT: 2, SIGTERM: 15 }[report.interrupted] ?? 0);
  return report.passed ? EXIT.ok : EXIT.failed;
}

function seedFrom(text) {
  if (!/^\d{1,9}$/.test(text.trim())) {
    throw new UsageError(`--seed takes a whole number, such as the one a capstone verify printed (got "${text}").`);
  }
  return Number(text.trim());
}
