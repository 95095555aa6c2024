// Fixture programs describe their own expected verdict in header comments:
//   // expect: pass
//   // expect: fail at <step-id>   (or: fail at <step-id> or <step-id>, when timing decides which step sees the mistake first)
//   // expect-text: words the failure detail must contain (may repeat)
//   // expect-text at <step-id>: words it must contain when it fails at that step
//   // ready-timeout: 5000   (optional: shorter readiness deadline for programs that never answer)
//
// A derived fixture states only its mistake: the program is a file of the
// repository (a lesson's solution) with a few exact lines replaced, so the
// fixture cannot drift from the solution it breaks:
//   // derive-from: solutions/capstone/server.js
//   /* replace:
//       const worker = cluster.fork({ CLUSTER_CONFIG: JSON.stringify(config) });
//   with:
//       const worker = cluster.fork();
//   */
// Each "replace:" block's lines must stand exactly once in the source (leading
// white space counts, trailing does not), so a solution change that removes
// or repeats them fails loudly instead of testing a program nobody meant.
import { copyFileSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, existsSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join, relative } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

import { makePm2Workspace } from './pm2.js';

// Files a lesson reads beside the learner's program.
const COMPANIONS = ['Dockerfile', 'nginx.conf'];

export const FIXTURES_DIR = new URL('../fixtures/', import.meta.url).pathname;
// Lessons whose fixtures run from a workspace with PM2 (their manifest "needs" pm2).
const PM2_LESSONS = new Set(['process-manager']);
const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));

export function parseExpectations(file) {
  const head = readFileSync(file, 'utf8').split('\n').slice(0, 30);
  const out = { texts: [], textsAt: {} };
  for (const line of head) {
    let m;
    if ((m = /^\s*\/\/\s*expect:\s*pass\s*$/.exec(line))) out.pass = true;
    else if ((m = /^\s*\/\/\s*expect:\s*fail at\s+([\w-]+(?:\s+or\s+[\w-]+)*)\s*$/.exec(line))) out.failAt = m[1].split(/\s+or\s+/);
    else if ((m = /^\s*\/\/\s*expect-text:\s*(.+?)\s*$/.exec(line))) out.texts.push(m[1]);
    else if ((m = /^\s*\/\/\s*expect-text at\s+([\w-]+):\s*(.+?)\s*$/.exec(line))) (out.textsAt[m[1]] ??= []).push(m[2]);
    else if ((m = /^\s*\/\/\s*ready-timeout:\s*(\d+)\s*$/.exec(line))) out.readyTimeoutMs = Number(m[1]);
  }
  if (!out.pass && !out.failAt) throw new Error(`${file} has no "// expect: pass" or "// expect: fail at <step>" line`);
  return out;
}

/** The words a failure at `stepId` must contain, by the fixture's header. */
export function textsFor(expectation, stepId) {
  return [...expectation.texts, ...(expectation.textsAt?.[stepId] ?? [])];
}

/** Every fixture program of a lesson: test/fixtures/<NN-id>/*.{js,cjs,mjs} (folders are multi-file fixtures with server.js). */
export function fixturesOf(lesson) {
  const dir = join(FIXTURES_DIR, lesson.id);
  if (!existsSync(dir)) return [];
  // A folder is a fixture with its server.js, or (process-manager) with only
  // the ecosystem file it changes: the header is in the file it holds.
  const inFolder = (d) => ['server.js', 'ecosystem.config.cjs'].map((f) => join(d, f)).find((f) => existsSync(f)) ?? join(d, 'server.js');
  return readdirSync(dir, { withFileTypes: true })
    .map((e) => (e.isDirectory() ? inFolder(join(dir, e.name)) : join(dir, e.name)))
    .filter((f) => /\.(c|m)?js$/.test(f) && existsSync(f))
    .sort();
}

const shown = (file) => relative(REPO_ROOT, file);

/**
 * A derived fixture's source file and replacement blocks, or null for a
 * fixture that is a whole program.
 */
export function parseDerivation(file) {
  const lines = readFileSync(file, 'utf8').split('\n');
  const from = lines.map((l) => /^\s*\/\/\s*derive-from:\s*(\S+)\s*$/.exec(l)?.[1]).find(Boolean);
  if (!from) return null;
  const replacements = [];
  for (let i = 0; i < lines.length; i++) {
    if (!/^\s*\/\*\s*replace:\s*$/.test(lines[i])) continue;
    const endAt = lines.findIndex((l, j) => j > i && /^\s*\*\/\s*$/.test(l));
    const withAt = lines.findIndex((l, j) => j > i && j < endAt && /^\s*with:\s*$/.test(l));
    if (endAt < 0 || withAt < 0) {
      throw new Error(`${shown(file)}:${i + 1}: a "/* replace:" block needs a "with:" line and then a "*/" line`);
    }
    const find = lines.slice(i + 1, withAt);
    if (!find.some((l) => l.trim())) throw new Error(`${shown(file)}:${i + 1}: the "replace:" block has no lines to find`);
    replacements.push({ line: i + 1, find, put: lines.slice(withAt + 1, endAt) });
    i = endAt;
  }
  if (replacements.length === 0) {
    throw new Error(`${shown(file)} says "derive-from: ${from}" but has no "/* replace: ... with: ... */" block`);
  }
  return { source: join(REPO_ROOT, from), replacements };
}

/**
 * The source text with every replacement applied. Each block's lines must
 * stand exactly once in the original source, and blocks must not overlap;
 * otherwise this throws, naming the fixture, the block and what to do.
 */
export function applyReplacements(sourceText, replacements, { fixture = 'fixture', source = 'source' } = {}) {
  const lines = sourceText.split('\n');
  const same = (a, b) => a.trimEnd() === b.trimEnd();
  const spans = replacements.map((r, n) => {
    const at = [];
    for (let i = 0; i + r.find.length <= lines.length; i++) {
      if (r.find.every((l, k) => same(l, lines[i + k]))) at.push(i);
    }
    if (at.length !== 1) {
      const where = at.length ? `${at.length} times (lines ${at.map((i) => i + 1).join(', ')})` : 'nowhere';
      throw new Error(
        `${fixture}:${r.line}: replacement ${n + 1} of ${replacements.length} must match exactly once in ${source}, ` +
          `but its ${r.find.length} line(s) starting\n    ${r.find.find((l) => l.trim()).trim()}\n` +
          `stand ${where}. The source changed: update the fixture's "replace:" block (or its derive-from) ` +
          `so it still states the same mistake.`,
      );
    }
    return { ...r, start: at[0], end: at[0] + r.find.length };
  });
  spans.sort((a, b) => a.start - b.start);
  for (let k = 1; k < spans.length; k++) {
    if (spans[k].start < spans[k - 1].end) {
      throw new Error(`${fixture}:${spans[k].line}: this replacement overlaps the one at line ${spans[k - 1].line}; merge them`);
    }
  }
  const out = [];
  let next = 0;
  for (const s of spans) {
    out.push(...lines.slice(next, s.start), ...s.put);
    next = s.end;
  }
  out.push(...lines.slice(next));
  return out.join('\n');
}

/** A derived fixture's program text and source file, or null (throws when it no longer applies). */
export function derive(file) {
  const derivation = parseDerivation(file);
  if (!derivation) return null;
  const { source, replacements } = derivation;
  if (!existsSync(source)) throw new Error(`${shown(file)}: derive-from names ${shown(source)}, which does not exist`);
  const text = applyReplacements(readFileSync(source, 'utf8'), replacements, { fixture: shown(file), source: shown(source) });
  return { text, source };
}

/** The "type" of the package.json nearest to a file, so a copy elsewhere runs as the same kind of module. */
function moduleTypeOf(file) {
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) return JSON.parse(readFileSync(pkg, 'utf8')).type ?? 'commonjs';
    if (dirname(dir) === dir) return 'commonjs';
  }
}

/**
 * Runnable programs for fixtures: a whole-program fixture is itself; a derived
 * one is written, under its own file name, to <temporary folder>/<lesson>/,
 * created on first need. cleanup() removes the folder.
 */
export class FixturePrograms {
  #root = null;

  programOf(file) {
    if (PM2_LESSONS.has(basename(dirname(dirname(file))))) return this.#pm2Program(file);
    const derived = derive(file);
    if (!derived) return file;
    this.#root ??= mkdtempSync(join(tmpdir(), 'cw-derived-fixtures-'));
    const dir = join(this.#root, basename(dirname(file)));
    mkdirSync(dir, { recursive: true });
    // The temporary folder has no package.json: give it the module type the
    // source was written for (express and co. resolve through the harness's
    // module fallback from any folder).
    const pkg = join(dir, 'package.json');
    if (!existsSync(pkg)) writeFileSync(pkg, JSON.stringify({ type: moduleTypeOf(derived.source) }) + '\n');
    const program = join(dir, basename(file));
    writeFileSync(program, derived.text);
    // Some lessons read a file beside the program (containers: the
    // Dockerfile; beyond-one-machine: nginx.conf): a derived fixture takes
    // the one beside it along, else the one beside the program it derives from.
    for (const name of COMPANIONS) {
      const companion = [dirname(file), dirname(derived.source)].map((d) => join(d, name)).find((f) => existsSync(f));
      if (companion) copyFileSync(companion, join(dir, name));
    }
    return program;
  }

  /**
   * A process-manager fixture (a folder): its server.js and
   * ecosystem.config.cjs, each its own (derived or whole) or else the
   * solution's, written into a temporary workspace with PM2 installed, as a
   * learner's (test/helpers/pm2.js). Returns the server.js to verify.
   */
  #pm2Program(file) {
    const folder = dirname(file);
    const lesson = basename(dirname(folder));
    this.#root ??= mkdtempSync(join(tmpdir(), 'cw-derived-fixtures-'));
    const workspace = join(this.#root, `${lesson}-workspace`);
    if (!existsSync(workspace)) makePm2Workspace((mkdirSync(workspace, { recursive: true }), workspace));
    const dir = join(workspace, basename(folder));
    mkdirSync(dir, { recursive: true });
    // A fixture may hold more files (a module of routes, a package.json
    // saying "type": "commonjs"): copied as they are.
    for (const name of readdirSync(folder)) {
      if (name !== 'server.js' && name !== 'ecosystem.config.cjs') writeFileSync(join(dir, name), readFileSync(join(folder, name)));
    }
    for (const name of ['server.js', 'ecosystem.config.cjs']) {
      const own = join(folder, name);
      const text = existsSync(own) ? (derive(own)?.text ?? readFileSync(own, 'utf8')) : readFileSync(join(REPO_ROOT, 'solutions', lesson, name), 'utf8');
      writeFileSync(join(dir, name), text);
    }
    return join(dir, 'server.js');
  }

  /**
   * The reference solution as a runnable program: itself, or for a lesson
   * that needs PM2, its files copied into a workspace with PM2 installed (the
   * package does not ship PM2, so solutions/ has none beside it).
   */
  solutionOf(lesson) {
    if (!PM2_LESSONS.has(lesson.id)) return lesson.paths.solution;
    this.#root ??= mkdtempSync(join(tmpdir(), 'cw-derived-fixtures-'));
    const workspace = join(this.#root, `${lesson.id}-workspace`);
    if (!existsSync(workspace)) makePm2Workspace((mkdirSync(workspace, { recursive: true }), workspace));
    const dir = join(workspace, 'solution');
    mkdirSync(dir, { recursive: true });
    const from = dirname(lesson.paths.solution);
    for (const name of readdirSync(from)) writeFileSync(join(dir, name), readFileSync(join(from, name)));
    return join(dir, basename(lesson.paths.solution));
  }

  cleanup() {
    if (this.#root) rmSync(this.#root, { recursive: true, force: true });
    this.#root = null;
  }
}

// `node test/helpers/fixtures.js <fixture>` prints the program a derived
// fixture stands for, to run or diff it by hand.
if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const file = process.argv[2];
  if (!file) {
    console.error('Usage: node test/helpers/fixtures.js test/fixtures/<lesson>/<fixture>.js > program.js');
    process.exit(2);
  }
  try {
    process.stdout.write(derive(file)?.text ?? readFileSync(file, 'utf8'));
  } catch (err) {
    console.error(err.message);
    process.exit(1);
  }
}
