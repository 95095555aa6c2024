#!/usr/bin/env node
// The flake hunt: verifies every lesson's reference solution and every
// fixture program (test/fixtures/<id>/) `rounds` times while CPU hogs keep
// every core busy, then prints the wrong verdicts per lesson and the slowest
// runs. A wrong verdict is a pass that should fail, a failure at another step
// or without the promised words, or a process left behind.
//
//   npm run stress [rounds] [-- --lessons 1,3] [--no-hogs | --hogs N] [--record]
//   npm run stress -- --ledger
//   npm run stress 5 -- --lessons capstone --programs solution,no-recovery
//
// --hogs N spins N hogs instead of one per core: stress runs side by side
// (each its own lessons) share the machine's load, so that four of them with
// no hogs load two cores about as one with two hogs does, in a quarter of the
// time.
//
// --record adds the rounds to docs/stress-ledger.json, which counts rounds
// across runs for as long as the code they ran is unchanged (see
// stress-ledger.js); --ledger prints how many each lesson has and exits.
//
// --programs keeps only the programs whose name contains one of the words
// (`solution` is the reference): the hunt for one flake, never recorded.
//
// Exit code 1 when any verdict was wrong. Fix a flake at its cause (a race, a
// deadline too tight for a loaded 2-core machine), never by retrying.
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { mkdirSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, join, relative } from 'node:path';
import { parseArgs } from 'node:util';
import { loadLessons, loadVerifier } from '../lib/manifest.js';
import { runVerifier, memoryStore } from '../lib/harness/runner.js';
import { TextReporter } from '../lib/cli/reporter.js';
import { markedProcesses } from '../lib/harness/processes.js';
import { fixturesOf, parseExpectations, textsFor, FixturePrograms } from '../test/helpers/fixtures.js';
import { LEDGER_PATH, fingerprintOf, readLedger, recordRun, standing, writeLedger } from './stress-ledger.js';

const { values, positionals } = parseArgs({
  options: {
    lessons: { type: 'string' },
    'no-hogs': { type: 'boolean' },
    hogs: { type: 'string' },
    record: { type: 'boolean' },
    ledger: { type: 'boolean' },
    programs: { type: 'string' },
  },
  allowPositionals: true,
});
const rounds = Number(positionals[0] ?? 10);
if (!Number.isInteger(rounds) || rounds < 1) {
  console.error('Usage: npm run stress [rounds] [-- --lessons 1,3 --no-hogs]');
  process.exit(2);
}
const wanted = values.lessons?.split(',').map((s) => s.trim());
const lessons = loadLessons().filter((l) => !wanted || wanted.includes(String(l.number)) || wanted.includes(l.id));

if (values.ledger) {
  const ledger = readLedger();
  console.log(`Stressed rounds per lesson with the code as it is now (${relative(process.cwd(), LEDGER_PATH)}):`);
  for (const l of lessons) {
    const s = standing(ledger, l);
    const note = s.stale ? ` (${ledger.lessons[l.id].rounds} earlier round(s) ran code that has changed since)` : '';
    console.log(`  ${l.id.padEnd(20)} ${String(s.rounds).padStart(3)} round(s), ${s.wrong} wrong${note}`);
  }
  process.exit(0);
}
// Taken before the first verify: files edited during the run must not be credited with it.
const fingerprints = new Map(lessons.map((l) => [l.id, fingerprintOf(l)]));

// CPU hogs: one spinning process per core, at normal priority, for the whole run.
const hogCount = values['no-hogs'] ? 0 : Number(values.hogs ?? availableParallelism());
if (!Number.isInteger(hogCount) || hogCount < 0) {
  console.error(`--hogs ${values.hogs}: expected a whole number of CPU hogs, such as 0 or 2`);
  process.exit(2);
}
const hogs = Array.from({ length: hogCount }, () =>
  spawn(process.execPath, ['-e', 'for (;;) {}'], { stdio: 'ignore' }),
);
const stopHogs = () => hogs.forEach((h) => h.kill('SIGKILL'));
process.on('exit', stopHogs);
// Derived fixtures (// derive-from:) run from a temporary folder, removed at exit.
const programs = new FixturePrograms();
process.on('exit', () => programs.cleanup());
for (const s of ['SIGINT', 'SIGTERM', 'SIGHUP']) {
  process.on(s, () => {
    stopHogs();
    process.exit(130);
  });
}

/** Every program to verify in a lesson, with its expected verdict. */
async function casesOf(lesson) {
  const verifier = await loadVerifier(lesson);
  const cases = [{ lesson, verifier, file: programs.solutionOf(lesson), name: 'solution', expect: { pass: true, texts: [] } }];
  for (const file of fixturesOf(lesson)) {
    const name = file.endsWith('/server.js') ? `${basename(file.slice(0, -10))}/` : basename(file);
    cases.push({ lesson, verifier, file: programs.programOf(file), name, expect: parseExpectations(file) });
  }
  return cases;
}

/** What went wrong with a verdict, or null when it is the expected one. */
function wrongVerdict(c, report, left) {
  const failed = report.steps.find((s) => !s.passed);
  if (left.length) return `left ${left.length} process(es) behind: ${left.map((p) => p.pid).join(', ')}`;
  if (c.expect.pass) return report.passed ? null : `failed at ${failed?.id}: ${failed?.detail.split('\n')[0]}`;
  if (report.passed) return `passed; expected to fail at ${c.expect.failAt}`;
  if (!c.expect.failAt.includes(failed.id)) return `failed at ${failed.id}, expected ${c.expect.failAt.join(' or ')}: ${failed.detail.split('\n')[0]}`;
  const missing = textsFor(c.expect, failed.id).filter((t) => !failed.detail.includes(t));
  if (missing.length) return `failed at ${failed.id} without "${missing.join('", "')}": ${failed.detail.split('\n')[0]}`;
  return null;
}

const only = values.programs?.split(',').map((s) => s.trim()).filter(Boolean);
if (only && values.record) {
  console.error('--programs runs part of a catalogue: it cannot be recorded (drop --record)');
  process.exit(2);
}
const all = [];
for (const lesson of lessons) all.push(...(await casesOf(lesson)).filter((c) => !only || only.some((w) => c.name.includes(w))));
console.log(`stress: ${rounds} round(s) of ${all.length} verifies (${lessons.length} lessons) with ${hogs.length} CPU hog(s)`);

// The whole log of every wrong verdict is kept: a flake is fixed from its log.
const logDir = join(tmpdir(), `cluster-workshop-stress-${process.pid}`);
const runs = [];
const started = performance.now();

// With --record, each lesson is written to the ledger as soon as its last
// program of the last round has run (a run stopped later keeps the lessons it
// finished), if none of its files changed since the run began.
const recorded = new Set();
function recordLesson(l) {
  if (recorded.has(l.id) || fingerprintOf(l) !== fingerprints.get(l.id)) return;
  const mine = runs.filter((r) => r.lesson === l.id);
  const ledger = readLedger();
  recordRun(ledger, {
    lesson: l.id,
    fingerprint: fingerprints.get(l.id),
    programs: all.filter((c) => c.lesson === l).length,
    rounds,
    wrong: mine.filter((r) => r.wrong).length,
  });
  writeLedger(ledger);
  recorded.add(l.id);
}
const lastOf = new Map(all.map((c) => [c.lesson.id, c]));
for (let round = 1; round <= rounds; round++) {
  for (const c of all) {
    let log = '';
    const report = await runVerifier({
      lesson: c.lesson,
      file: c.file,
      verifier: c.verifier,
      reporter: new TextReporter({ write: (text) => (log += text), color: false }),
      store: memoryStore(),
      readyTimeoutMs: c.expect.readyTimeoutMs,
    });
    const left = markedProcesses().filter((p) => Number(p.mark.split(':')[0]) === process.pid);
    const wrong = wrongVerdict(c, report, left);
    runs.push({ round, lesson: c.lesson.id, name: c.name, ms: report.durationMs, wrong });
    if (wrong) {
      mkdirSync(logDir, { recursive: true });
      const logFile = join(logDir, `${c.lesson.id}--${c.name.replace(/\W+/g, '_')}--round${round}.log`);
      writeFileSync(logFile, `${wrong}\n\n${log}`);
      process.stdout.write(`\n  WRONG ${c.lesson.id}/${c.name} (round ${round}): ${wrong}\n  log: ${logFile}\n`);
    } else process.stdout.write('.');
    if (values.record && round === rounds && lastOf.get(c.lesson.id) === c) recordLesson(c.lesson);
  }
  process.stdout.write(` round ${round}/${rounds} done (${Math.round((performance.now() - started) / 1000)} s)\n`);
}
stopHogs();

// The table: wrong verdicts per lesson, then the slowest runs.
const rows = lessons.map((l) => {
  const mine = runs.filter((r) => r.lesson === l.id);
  const ms = mine.map((r) => r.ms).sort((a, b) => a - b);
  return {
    lesson: l.id,
    programs: all.filter((c) => c.lesson === l).length,
    runs: mine.length,
    wrong: mine.filter((r) => r.wrong).length,
    median: ms.length ? `${(ms[Math.floor(ms.length / 2)] / 1000).toFixed(1)} s` : '-',
    worst: ms.length ? `${(ms[ms.length - 1] / 1000).toFixed(1)} s` : '-',
  };
});
const line = (cells, widths) => cells.map((c, i) => String(c).padEnd(widths[i])).join('  ');
const widths = [20, 8, 5, 5, 7, 7];
console.log(`\nWrong verdicts per lesson (${rounds} round(s), ${hogs.length} CPU hogs):`);
console.log(line(['lesson', 'programs', 'runs', 'wrong', 'median', 'worst'], widths));
for (const r of rows) console.log(line([r.lesson, r.programs, r.runs, r.wrong, r.median, r.worst], widths));
const wrongRuns = runs.filter((r) => r.wrong);
console.log(line(['total', all.length, runs.length, wrongRuns.length, '', ''], widths));

console.log('\nSlowest runs:');
for (const r of [...runs].sort((a, b) => b.ms - a.ms).slice(0, 10)) {
  console.log(`  ${(r.ms / 1000).toFixed(1).padStart(5)} s  ${r.lesson}/${r.name} (round ${r.round})`);
}
if (wrongRuns.length) {
  console.log('\nWrong verdicts:');
  for (const r of wrongRuns) console.log(`  ${r.lesson}/${r.name} (round ${r.round}): ${r.wrong}`);
}

if (values.record) {
  const changed = lessons.filter((l) => !recorded.has(l.id) && fingerprintOf(l) !== fingerprints.get(l.id)).map((l) => l.id);
  for (const l of lessons) if (!changed.includes(l.id)) recordLesson(l);
  if (changed.length) console.log(`\nNot recorded (their files changed during the run): ${changed.join(', ')}`);
  const ledger = readLedger();
  console.log(`\nRecorded in ${relative(process.cwd(), LEDGER_PATH)}; now:`);
  for (const l of lessons) console.log(`  ${l.id.padEnd(20)} ${String(standing(ledger, l).rounds).padStart(3)} round(s)`);
}
process.exitCode = wrongRuns.length ? 1 : 0;
