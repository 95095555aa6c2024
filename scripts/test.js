#!/usr/bin/env node
// `npm test`: the suite CI runs, as pieces that three lanes take from one
// queue, the longest first (a lane that is done takes the next piece):
// - the fixture catalogue, as scripts/ci-plan.js chose it from the stress
//   ledger (each lesson's sentinels where a stress round proved its code,
//   else all its fixtures), in four pieces: the PM2 lesson at nice 10 (it
//   mostly waits on PM2, and its verdicts hold there), the nginx lesson, the
//   rolling restarts (rolling-restart, capstone), the other lessons. Niced
//   beside busy lanes, the nginx lesson's programs once got a tenth of the
//   CPU and a correct one failed capacity, so only PM2 is niced;
// - everything that is not a catalogue (course, harness, CLI, classroom) in
//   two pieces (jest --shard);
// - with NODE_VERSIONS="22 24" (CI sets it), a piece per major for the tests
//   whose outcome depends on the Node version (.ci/node-versions.sh);
// - after the lanes, alone on the machine: the tests that assert a verify
//   ends what a killed one left (ALONE_FILES), which another lane's verify
//   could end first.
// Before any piece the plan is printed; when the catalogues it needs would
// take CI past its budget, npm test stops there, with the command that
// proves them (ci-plan.js), rather than at CI's time limit.
//
// Each jest piece writes its results as JSON; at the very end come the 15
// slowest test files with their seconds, the total, and every failed test
// with the lines that explain it, so a CI log is read from its last screen.
//
// With arguments (`npm test -- test/course.test.js`), one jest process runs
// just those, with every fixture (no plan); JEST_JSON=<file> writes its
// results there (the Node-version pieces use it).
import { spawn } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { currentPlan, describePlan } from './ci-plan.js';
import { summary } from './test-summary.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const jest = ['--experimental-vm-modules', 'node_modules/jest/bin/jest.js'];
const LANES = 3;
// The tests whose outcome depends on the Node version (README, "Requirements").
const NODE_VERSION_TESTS = 'test/course.test.js test/harness- test/run- test/watch.test.js';
const CATALOGUE_FILES = 'test/mistakes(-daemons)?\\.test\\.js';
// Tests that kill a verify and assert that the next verify ends what it left.
// Every verify starts by ending such leftovers on the whole machine, so a
// verify of another lane (the catalogues run them back to back) can end them
// first, and the assertion fails (it did in a clean-clone CI run). They run
// after the lanes, alone: on the machine's Node, and interrupt-signals (it
// depends on the Node version too) on each of NODE_VERSIONS.
const ALONE_FILES = ['test/interrupt-signals.test.js', 'test/beyond-one-machine-teardown.test.js'];
const ALONE_NODE_VERSION_TESTS = 'test/interrupt-signals.test.js';

const args = process.argv.slice(2);
const majors = (process.env.NODE_VERSIONS ?? '').split(/[\s,]+/).filter(Boolean);
const results = mkdtempSync(join(tmpdir(), 'cw-test-results-'));
process.on('exit', () => rmSync(results, { recursive: true, force: true }));

const slug = (name) => name.replace(/[^a-z0-9]+/gi, '-');
const readReport = (name) => {
  const file = join(results, `${slug(name)}.json`);
  return existsSync(file) ? JSON.parse(readFileSync(file, 'utf8')) : null;
};
const jestJson = (name) => ['--json', `--outputFile=${join(results, `${slug(name)}.json`)}`];

if (args.length) {
  // One jest process, its output as it comes (a developer's run, or a Node-version piece).
  const out = process.env.JEST_JSON ? ['--json', `--outputFile=${process.env.JEST_JSON}`] : [];
  const child = spawn(process.execPath, [...jest, ...out, ...args], { cwd: root, stdio: 'inherit' });
  for (const signal of ['SIGINT', 'SIGTERM']) process.on(signal, () => child.kill(signal));
  child.on('close', (code) => (process.exitCode = code ?? 1));
} else {
  await runSuite();
}

async function runSuite() {
  const plan = await currentPlan();
  console.log(describePlan(plan));
  if (plan.overBudget) {
    process.exitCode = 1;
    return;
  }
  const planFile = join(results, 'plan.json');
  writeFileSync(planFile, JSON.stringify(plan));
  const secondsOf = (ids) => plan.lessons.filter((r) => ids.includes(r.id)).reduce((s, r) => s + r.seconds, 0);
  const lessonIds = plan.lessons.map((r) => r.id);
  const groups = [
    { name: 'catalogue: process-manager', file: 'test/mistakes-daemons.test.js', lessons: ['process-manager'], nice: 10 },
    { name: 'catalogue: beyond-one-machine', file: 'test/mistakes-daemons.test.js', lessons: ['beyond-one-machine'] },
    { name: 'catalogue: rolling-restart, capstone', file: 'test/mistakes.test.js', lessons: ['rolling-restart', 'capstone'] },
  ];
  const grouped = groups.flatMap((g) => g.lessons);
  groups.push({ name: 'catalogue: the other lessons', file: 'test/mistakes.test.js', lessons: lessonIds.filter((id) => !grouped.includes(id)) });

  const jestPiece = (name, weight, files, { env = {}, nice } = {}) => ({
    name,
    weight,
    command: nice ? 'nice' : process.execPath,
    args: [...(nice ? ['-n', String(nice), process.execPath] : []), ...jest, ...jestJson(name), ...files],
    env,
  });
  const pieces = [
    ...groups.map((g) =>
      jestPiece(g.name, secondsOf(g.lessons), [g.file], { nice: g.nice, env: { CATALOGUE_PLAN: planFile, CATALOGUE_LESSONS: g.lessons.join(',') } }),
    ),
    // Everything that is not a catalogue (course, harness, CLI, classroom), in
    // two halves by jest's --shard: in one piece it ran 1407 s, the longest
    // lane of a 26-minute CI run.
    ...[1, 2].map((k) => jestPiece(`main ${k}/2`, 700, [`--shard=${k}/2`, '--testPathIgnorePatterns', CATALOGUE_FILES, ...ALONE_FILES])),
    ...majors.map((major) => ({
      name: `node ${major}`,
      weight: 450,
      command: 'bash',
      args: ['.ci/node-versions.sh', major],
      env: { NODE_VERSION_TESTS, JEST_JSON: join(results, `${slug(`node ${major}`)}.json`) },
    })),
  ];
  const queue = pieces.sort((a, b) => b.weight - a.weight);
  const running = new Set();
  const ended = [];

  /** Runs one piece; resolves its exit code (1 when a signal ended it). */
  const run = (piece) => {
    const started = performance.now();
    const child = spawn(piece.command, piece.args, { cwd: root, env: { ...process.env, ...piece.env }, stdio: ['ignore', 'pipe', 'pipe'] });
    running.add(child);
    // Line by line with the piece's name, so that the lanes' lines do not run into each other.
    for (const [from, to] of [[child.stdout, process.stdout], [child.stderr, process.stderr]]) {
      createInterface({ input: from }).on('line', (line) => to.write(`[${piece.name}] ${line}\n`));
    }
    return new Promise((resolve) =>
      child.on('close', (code) => {
        running.delete(child);
        const seconds = Math.round((performance.now() - started) / 1000);
        console.log(`[${piece.name}] finished in ${seconds} s (exit code ${code ?? 'none'})`);
        ended.push({ piece, code: code ?? 1, seconds });
        resolve(code ?? 1);
      }),
    );
  };

  let stopping = false;
  // A lane: the next piece of the queue until none is left; every one runs
  // even when one before it failed, so the log shows them all.
  const lane = async () => {
    while (queue.length && !stopping) await run(queue.shift());
  };
  // A stop (Ctrl-C, or CI's SIGTERM) reaches every piece running: each jest
  // ends its verifiers and their processes. (`nice` executes jest in its own place.)
  for (const signal of ['SIGINT', 'SIGTERM']) {
    process.on(signal, () => {
      stopping = true;
      for (const child of running) child.kill(signal);
    });
  }

  const started = performance.now();
  await Promise.all(Array.from({ length: Math.min(LANES, queue.length) }, lane));
  // Then, one at a time with nothing else running: ALONE_FILES.
  const alone = [
    jestPiece('alone', 0, ALONE_FILES),
    ...majors.map((major) => ({
      name: `alone, node ${major}`,
      command: 'bash',
      args: ['.ci/node-versions.sh', major],
      env: { NODE_VERSION_TESTS: ALONE_NODE_VERSION_TESTS, JEST_JSON: join(results, `${slug(`alone, node ${major}`)}.json`) },
    })),
  ];
  for (const piece of alone) if (!stopping) await run(piece);
  const failedPieces = ended.filter((e) => e.code !== 0);
  console.log(`\nnpm test: ${ended.length} pieces in ${Math.round((performance.now() - started) / 1000)} s, ${failedPieces.length} failed`);
  console.log(summary(ended.map((e) => ({ name: e.piece.name, code: e.code, report: readReport(e.piece.name) }))));
  process.exitCode = ended.length && failedPieces.length === 0 && !stopping ? 0 : 1;
}
