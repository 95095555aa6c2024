#!/usr/bin/env node
// Which fixture programs CI verifies. The whole catalogue (every program of
// test/fixtures/, hundreds of verifies) is the product's proof, but on two
// cores it takes hours: it runs under CPU load in `npm run stress`, and the
// stress ledger (docs/stress-ledger.json) records, per lesson, the rounds it
// passed with the code as it is now (its fingerprint: scripts/stress-ledger.js).
//
// - A lesson whose current fingerprint has a recorded stress round with 0
//   wrong verdicts runs its sentinels in CI: the fixtures whose header says
//   `// sentinel: why` (one per step its fixtures fail at, its blind-authored
//   correct programs; test/ci-plan.test.js holds every lesson to that).
// - Any other lesson (changed since its last stress round, never stressed, or
//   with a wrong verdict there) runs its whole catalogue: a change is proven
//   where it happened.
// - When those whole catalogues would take CI past its budget (a change to
//   the harness touches every lesson), the plan says so at once, names the
//   lessons and the command that records them, and CI fails in its first
//   minute instead of at its time limit.
//
//   node scripts/ci-plan.js           prints the plan
//   node scripts/ci-plan.js --check   the same, exit 1 when over the budget
//   node scripts/ci-plan.js --json F  writes the plan to F (scripts/test.js)
//
// planCatalogue is pure (the ledger, the lessons' fingerprints and fixtures
// come in), so its rules are tested on a fake ledger; the rest gathers them.
import { readFileSync, writeFileSync } from 'node:fs';
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/** CI's budget for the whole of .ci/run: installs, the plan, every lane. */
export const BUDGET_S = 30 * 60;
/**
 * How many lane-seconds pass in one second of CI: npm test runs three jest
 * processes at once (scripts/test.js) on two cores: a clean-clone run of
 * the whole catalogue did 13,500 lane-seconds in 5,316 s (2.5), one of the
 * sentinels 4,252 in 1,555 s (2.7).
 */
export const PARALLEL = 2.6;
/**
 * What every run costs whatever the plan: installs on a fresh machine
 * (Debian's chromium, nginx, pm2, npm ci) and the lane-seconds of the tests
 * that are not the catalogue (everything else on Node 20, the Node-version
 * tests on 22 and 24), measured in clean-clone CI runs on two cores.
 */
export const SETUP_S = 240;
// main 1407 s, node 22 602 s, node 24 505 s (2026-12-07, beside a stress run).
export const OTHER_TESTS_S = 2400;
/**
 * Seconds one fixture program takes in a CI lane, per lesson (the median
 * verify under load, from the stress rounds and CI's per-test times: the
 * sentinels of rolling-restart and capstone took 546 s for 23, of
 * process-manager 293 s for 11, of beyond-one-machine 258 s for 12); a
 * lesson not listed counts DEFAULT_PROGRAM_S. Only the estimate uses them:
 * a wrong figure moves the budget check, never a verdict.
 */
export const PROGRAM_S = {
  bottleneck: 3,
  fork: 5,
  'worker-threads': 7,
  respawn: 6,
  broadcast: 4,
  'shared-state': 6,
  'graceful-shutdown': 12,
  'rolling-restart': 18,
  'health-check': 9,
  'redis-state': 8,
  'sticky-sessions': 7,
  containers: 6,
  'process-manager': 27,
  capstone: 30,
  'beyond-one-machine': 24,
};
export const DEFAULT_PROGRAM_S = 15;

/** A fixture's sentinel header line, and why it is one. */
const SENTINEL = /^[ \t]*(?:\/\/|#)[ \t]*sentinel:[ \t]*(.*?)[ \t]*$/m;
export const sentinelReason = (text) => SENTINEL.exec(text.split('\n').slice(0, 40).join('\n'))?.[1] ?? null;

/** Whether a ledger row proves a lesson's code as it is now: a round under this fingerprint, none wrong. */
export function provenBy(row, fingerprint) {
  if (!row) return { proven: false, why: 'never stressed' };
  if (row.fingerprint !== fingerprint) return { proven: false, why: 'changed since its last stress round' };
  if (!(row.rounds >= 1)) return { proven: false, why: 'no stress round recorded' };
  if (row.wrong > 0) return { proven: false, why: `${row.wrong} wrong verdict(s) in its ${row.rounds} stress round(s)` };
  return { proven: true, why: `${row.rounds} stress round(s), 0 wrong, on this code` };
}

/**
 * The plan: for each lesson the fixtures CI verifies, and whether the run
 * fits the budget.
 * @param {{ lessons: { id: string, fingerprint: string, fixtures: { file: string, sentinel: boolean }[] }[],
 *           ledger: { lessons: Record<string, { fingerprint: string, rounds: number, wrong: number }> },
 *           budgetS?: number, parallel?: number, setupS?: number, otherTestsS?: number,
 *           programS?: Record<string, number> }} o
 */
export function planCatalogue({ lessons, ledger, budgetS = BUDGET_S, parallel = PARALLEL, setupS = SETUP_S, otherTestsS = OTHER_TESTS_S, programS = PROGRAM_S }) {
  const rows = lessons.map((l) => {
    const { proven, why } = provenBy(ledger.lessons?.[l.id], l.fingerprint);
    const fixtures = (proven ? l.fixtures.filter((f) => f.sentinel) : l.fixtures).map((f) => f.file);
    return {
      id: l.id,
      mode: proven ? 'sentinels' : 'whole',
      why,
      fixtures,
      of: l.fixtures.length,
      seconds: fixtures.length * (programS[l.id] ?? DEFAULT_PROGRAM_S),
    };
  });
  const catalogueS = rows.reduce((sum, r) => sum + r.seconds, 0);
  const estimateS = Math.round(setupS + (otherTestsS + catalogueS) / parallel);
  const unproven = rows.filter((r) => r.mode === 'whole').map((r) => r.id);
  return {
    lessons: rows,
    estimateS,
    budgetS,
    overBudget: estimateS > budgetS,
    unproven,
    record: unproven.length ? `npm run stress 1 -- --lessons ${unproven.join(',')} --record` : null,
  };
}

const minutes = (s) => `${Math.round(s / 60)} min`;

/** The plan in words, for the first lines of CI's log. */
export function describePlan(plan) {
  const lines = ['Fixture catalogue in this run (scripts/ci-plan.js, by docs/stress-ledger.json):'];
  for (const r of plan.lessons) {
    const what = r.mode === 'sentinels' ? `${r.fixtures.length} sentinels of ${r.of}` : `all ${r.of} programs`;
    lines.push(`  ${r.id.padEnd(20)} ${what.padEnd(20)} ${r.why}`);
  }
  const total = plan.lessons.reduce((n, r) => n + r.fixtures.length, 0);
  lines.push(`  ${total} programs; estimated ${minutes(plan.estimateS)} of CI's ${minutes(plan.budgetS)}`);
  if (plan.overBudget) {
    lines.push(
      '',
      `OVER BUDGET: the whole catalogues of ${plan.unproven.join(', ')} would take CI to about ${minutes(plan.estimateS)}, past its ${minutes(plan.budgetS)}.`,
      'Each says why above: its code changed since its last stress round (a change to the harness changes every lesson), or that round had a wrong verdict (a flake: fix it at its cause, which changes the code). Prove the code under load and record it:',
      `  ${plan.record}`,
      'then commit docs/stress-ledger.json.',
    );
  } else if (plan.unproven.length) {
    lines.push(`  To run only their sentinels next time, record a stress round: ${plan.record}`);
  }
  return lines.join('\n');
}

/** The real lessons, their fingerprints and fixtures, with the ledger: the plan for this checkout. */
export async function currentPlan(options = {}) {
  const { loadLessons } = await import('../lib/manifest.js');
  const { fixturesOf } = await import('../test/helpers/fixtures.js');
  const { fingerprintOf, readLedger } = await import('./stress-ledger.js');
  const root = fileURLToPath(new URL('..', import.meta.url));
  const lessons = loadLessons().map((l) => ({
    id: l.id,
    fingerprint: fingerprintOf(l),
    fixtures: fixturesOf(l).map((file) => ({ file: relative(root, file), sentinel: sentinelReason(readFileSync(file, 'utf8')) !== null })),
  }));
  return planCatalogue({ lessons, ledger: readLedger(), ...options });
}

if (process.argv[1] && fileURLToPath(import.meta.url) === process.argv[1]) {
  const args = process.argv.slice(2);
  const plan = await currentPlan();
  console.log(describePlan(plan));
  const json = args.indexOf('--json');
  if (json >= 0) writeFileSync(args[json + 1], JSON.stringify(plan));
  if (args.includes('--check') && plan.overBudget) process.exitCode = 1;
}
