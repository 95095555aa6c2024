// Runs a verifier in the test's own process and returns its report and log,
// plus the process-table check every verifier test ends with.
import { findLesson, loadVerifier } from '../../lib/manifest.js';
import { runVerifier, memoryStore } from '../../lib/harness/runner.js';
import { TextReporter } from '../../lib/cli/reporter.js';
import { markedProcesses } from '../../lib/harness/processes.js';

export async function verifyFile(lessonName, file, { signal, readyTimeoutMs, store = memoryStore() } = {}) {
  const lesson = findLesson(lessonName);
  if (!lesson) throw new Error(`no lesson ${lessonName}`);
  const verifier = await loadVerifier(lesson);
  let log = '';
  const reporter = new TextReporter({ write: (s) => (log += s), color: false });
  const report = await runVerifier({ lesson, file, verifier, reporter, store, signal, readyTimeoutMs });
  return { report, log, failedStep: report.steps.find((s) => !s.passed) };
}

/** Processes started by verifier runs of this test process that are still alive. */
export function leftovers() {
  return markedProcesses().filter((p) => Number(p.mark.split(':')[0]) === process.pid);
}

/**
 * The verdict on its first line, then the end of the verifier's log, so a
 * failing assertion shows why: expect(verdictOf(result)).toMatch(/^verdict: passed\n/).
 */
export function verdictOf({ report, log }) {
  const failed = report.steps.find((s) => !s.passed);
  const verdict = report.passed ? 'passed' : `failed at ${failed?.id ?? '(no step)'}`;
  // Lines cut short: a program that floods its output would push the failure
  // message out of what CI keeps.
  const tail = log.split('\n').slice(-80).map((l) => (l.length > 240 ? `${l.slice(0, 240)}...` : l));
  const why = failed ? `--- why ---\n${failed.detail}\n` : '';
  return `verdict: ${verdict}\n${why}--- log ---\n${tail.join('\n')}`;
}

export const PASSED = /^verdict: passed\n/;
/** A verdict that failed at one of the steps (a step id or a list of them). */
export const failedAt = (steps) => new RegExp(`^verdict: failed at (${[steps].flat().join('|')})\n`);
