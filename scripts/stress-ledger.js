// The stress ledger: how many stressed rounds each lesson's catalogue has
// passed with the code as it is now. A whole-catalogue `npm run stress 10`
// takes about ten hours on a 2-core machine, longer than a working session,
// so rounds are counted across runs, but only while nothing they depend on
// has changed: a lesson's entry is keyed by a fingerprint of every file that
// can change one of its verdicts. Any change to those files starts the count
// again from zero, so the ledger never credits rounds to code they did not run.
import { createHash } from 'node:crypto';
import { existsSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { dirname, join, relative, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
export const LEDGER_PATH = join(ROOT, 'docs', 'stress-ledger.json');

// What every verdict depends on: the harness, the manifest and the fixture
// helpers (the parser of expectations, the PM2 workspace). package-lock.json
// because blind programs use express, ioredis and friends at the locked
// versions. Not the test runner's plumbing (scripts/, test/catalogue.js) nor
// which fixtures are sentinels (SENTINEL_LINE): neither can change a verdict,
// and counting them would send every lesson back to zero for a change of how
// CI picks its tests. Of verify/ itself,
// only what the lesson's verifier loads counts (verifierFiles): a shared
// check that lesson never runs cannot change its verdicts, and counting it
// would send every lesson back to zero whenever one lesson's check changes.
const SHARED = ['lib/harness', 'lib/manifest.js', 'test/helpers', 'package-lock.json'];

/** A fixture's `// sentinel: why` header line (scripts/ci-plan.js): left out of the fingerprint. */
export const SENTINEL_LINE = /^[ \t]*(?:\/\/|#)[ \t]*sentinel:.*(?:\r?\n|$)/gm;
const FIXTURES_DIR = join(ROOT, 'test', 'fixtures');
// Test helpers that only some lessons' fixtures run through, by what the
// lesson's manifest entry "needs": the workspace with PM2 that the
// process-manager fixtures run from cannot change another lesson's verdict.
const NEEDED_HELPERS = { 'test/helpers/pm2.js': 'pm2' };
const VERIFY_DIR = join(ROOT, 'verify');

// A relative module a file of verify/ loads: a static import or re-export, or
// a file started as a thread (new URL('./x.js', import.meta.url)).
const LOADS = /(?:\bfrom\s*|\bimport\s*\(?\s*|new URL\(\s*)['"](\.{1,2}\/[^'"]+)['"]/g;

/** The verifier and every file of verify/ (or of `within`) it loads, directly or not. */
export function verifierFiles(verifier, { within = VERIFY_DIR } = {}) {
  const seen = new Set();
  const visit = (file) => {
    if (seen.has(file) || !existsSync(file)) return;
    seen.add(file);
    for (const [, spec] of readFileSync(file, 'utf8').matchAll(LOADS)) {
      const target = resolve(dirname(file), spec);
      // lib/harness is hashed whole above; only verify/ is followed here.
      if (target.startsWith(`${resolve(within)}/`)) visit(target);
    }
  };
  visit(resolve(verifier));
  return [...seen];
}

function filesUnder(path) {
  if (!existsSync(path)) return [];
  if (!statSync(path).isDirectory()) return [path];
  return readdirSync(path, { withFileTypes: true })
    .filter((e) => e.name !== 'node_modules')
    .flatMap((e) => filesUnder(join(path, e.name)));
}

/** The lesson's entry in lessons/manifest.json. */
const manifestEntry = (lesson) => JSON.parse(readFileSync(join(ROOT, 'lessons', 'manifest.json'), 'utf8')).lessons.find((l) => l.id === lesson.id);

/**
 * Every file one lesson's stressed verdicts depend on: the shared code above
 * (less the helpers it does not need), the lesson's verifier with the checks
 * of verify/ it loads, its solution and fixtures; sorted.
 */
export function dependencies(lesson, entry = manifestEntry(lesson)) {
  const notNeeded = new Set(
    Object.entries(NEEDED_HELPERS)
      .filter(([, need]) => !entry?.needs?.includes(need))
      .map(([path]) => join(ROOT, path)),
  );
  const paths = [
    ...SHARED.map((p) => join(ROOT, p)),
    ...verifierFiles(lesson.paths.verifier),
    join(ROOT, 'solutions', lesson.id),
    join(ROOT, 'test', 'fixtures', lesson.id),
  ];
  return paths.flatMap(filesUnder).filter((f) => !notNeeded.has(f)).sort();
}

/**
 * A hash of every file one lesson's stressed verdicts depend on
 * (dependencies), its manifest entry, and Node's major version (timers and
 * the http agent change between them).
 */
export function fingerprintOf(lesson) {
  const entry = manifestEntry(lesson);
  const hash = createHash('sha256');
  hash.update(`node ${process.versions.node.split('.')[0]}\n${JSON.stringify(entry)}\n`);
  for (const file of dependencies(lesson, entry)) {
    hash.update(`${relative(ROOT, file)}\n`);
    const bytes = readFileSync(file);
    hash.update(file.startsWith(`${FIXTURES_DIR}/`) ? bytes.toString('utf8').replace(SENTINEL_LINE, '') : bytes);
  }
  return hash.digest('hex').slice(0, 16);
}

export function readLedger(path = LEDGER_PATH) {
  return existsSync(path) ? JSON.parse(readFileSync(path, 'utf8')) : { lessons: {} };
}

/**
 * Adds one stress run's results for a lesson. Runs under another
 * fingerprint are dropped: they proved code that is gone.
 */
export function recordRun(ledger, { lesson, fingerprint, programs, rounds, wrong, date = new Date().toISOString().slice(0, 10) }) {
  const old = ledger.lessons[lesson];
  const same = old?.fingerprint === fingerprint;
  ledger.lessons[lesson] = {
    fingerprint,
    programs,
    rounds: (same ? old.rounds : 0) + rounds,
    wrong: (same ? old.wrong : 0) + wrong,
    last: date,
  };
  return ledger;
}

export function writeLedger(ledger, path = LEDGER_PATH) {
  const sorted = Object.fromEntries(Object.entries(ledger.lessons).sort(([a], [b]) => a.localeCompare(b)));
  writeFileSync(path, `${JSON.stringify({ lessons: sorted }, null, 2)}\n`);
}

/** Rounds that still count for a lesson: those recorded under its current fingerprint. */
export function standing(ledger, lesson) {
  const entry = ledger.lessons[lesson.id];
  const current = entry?.fingerprint === fingerprintOf(lesson);
  return { rounds: current ? entry.rounds : 0, wrong: current ? entry.wrong : 0, stale: Boolean(entry) && !current };
}
