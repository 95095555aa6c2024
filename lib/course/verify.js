// Verifying a lesson, the one path `verify`, `watch` and the menu take: run
// the lesson's verifier on the learner's file, record the outcome in
// progress, report it to the classroom (after `join`), and give the exit
// code. How the run is shown is the caller's: it passes the reporter, and
// shows the verdict in onVerdict, before the classroom is told, so what to do
// next never waits on the network.
import { existsSync } from 'node:fs';
import { isAbsolute, relative } from 'node:path';
import { loadVerifier } from '../manifest.js';
import { runVerifier } from '../harness/runner.js';
import { Progress } from '../progress.js';
import { prepareWorkspace } from '../workspace.js';
import { EXIT, exitCodeForSignal } from './exit.js';

/**
 * @param {object} o
 * @param {object} o.lesson from the manifest
 * @param {string} o.file absolute path of the learner's program
 * @param {string} o.dir the workspace folder (resolved)
 * @param {object} o.reporter how the run is shown (TextReporter, SilentReporter)
 * @param {AbortSignal} [o.signal] aborting interrupts the run; its reason (a signal name) sets the exit code
 * @param {object} [o.options] run options a verifier reads as ctx.options (capstone: { seed })
 * @param {{ err: (s: string) => void, env?: object, cwd?: string }} o.io where warnings and the classroom line go
 * @param {(outcome: object) => void | Promise<void>} [o.onVerdict] shows the verdict, before the classroom report
 * @returns {Promise<{ report: object, exitCode: number, attempts: number }>} report: the runner's; interrupted runs are neither recorded nor reported
 */
export async function verifyLesson({ lesson, file, dir, reporter, signal, options = {}, io, onVerdict }) {
  const warn = (text) => io.err(`warning: ${text}\n`);
  const verifier = await loadVerifier(lesson);
  const progress = Progress.load(dir);
  // A file in the workspace: re-point its links to express (npx's folder may be gone) so `node server.js` works there too.
  const rel = relative(dir, file);
  if (existsSync(dir) && !rel.startsWith('..') && !isAbsolute(rel)) prepareWorkspace(dir).forEach(warn);

  const report = await runVerifier({ lesson, file, verifier, reporter, store: progress.measurements(), signal, options });
  if (report.interrupted) {
    progress.warnings.forEach(warn);
    const outcome = { report, exitCode: exitCodeForSignal(report.interrupted), attempts: progress.lesson(lesson.id).attempts };
    await onVerdict?.(outcome);
    return outcome;
  }

  progress.recordVerify(lesson.id, report);
  progress.save();
  progress.warnings.forEach(warn);
  const outcome = { report, exitCode: report.passed ? EXIT.ok : EXIT.failed, attempts: progress.lesson(lesson.id).attempts };
  await onVerdict?.(outcome);
  await reportToClassroom(lesson, outcome, { dir, io });
  return outcome;
}

// Classroom mode (after `join`): send the outcome to the instructor. Bounded
// to about a second, never throws, queues when unreachable, exit code
// unchanged. Loaded only when a verify ends, so other commands stay fast.
async function reportToClassroom(lesson, { report, attempts }, { dir, io }) {
  try {
    const { reportVerify } = await import('../classroom/client.js');
    await reportVerify({ lesson: lesson.id, report, attempts, dir, io });
  } catch {
    // reporting must never change a verify's outcome
  }
}
