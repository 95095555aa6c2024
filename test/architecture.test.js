// The layers of the package, read from the imports of every source file
// (lib/, bin/, verify/, scripts/), static and dynamic:
//   bin -> CLI commands (lib/cli) -> course layer (lib/course) -> harness
//   (lib/harness) -> verifiers (verify/<id>.js) and their shared checks.
// No import cycle anywhere; the harness imports neither the CLI, the course
// layer nor the classroom, and knows no lesson (no lib/manifest.js, no
// progress); a command never imports another command; the classroom never
// imports the harness.
import { readFileSync, readdirSync, statSync, existsSync } from 'node:fs';
import { dirname, join, relative, resolve, sep } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('../', import.meta.url));
const SOURCE_FOLDERS = ['lib', 'bin', 'verify', 'scripts'];

function sourceFiles(folder) {
  const out = [];
  const walk = (dir) => {
    for (const name of readdirSync(dir)) {
      const path = join(dir, name);
      if (statSync(path).isDirectory()) walk(path);
      else if (/\.(c|m)?js$/.test(name)) out.push(path);
    }
  };
  if (existsSync(folder)) walk(folder);
  return out;
}

/**
 * The source without comments, regular expressions and strings other than
 * import specifiers, so that an import written in a comment (a JSDoc type
 * such as {import('./program.js').LearnerProgram}), a string or a regular
 * expression is not taken for one.
 */
export function withoutComments(source) {
  let out = '';
  for (let i = 0; i < source.length; ) {
    const c = source[i];
    const next = source[i + 1];
    if (c === '/' && next === '/') {
      while (i < source.length && source[i] !== '\n') i++;
    } else if (c === '/' && next === '*') {
      const end = source.indexOf('*/', i + 2);
      i = end === -1 ? source.length : end + 2;
    } else if (c === '"' || c === "'" || c === '`') {
      let j = i + 1;
      while (j < source.length && source[j] !== c) j += source[j] === '\\' ? 2 : 1;
      const specifier = /(\bfrom|\bimport|\bimport\(|\brequire\()\s*$/.test(out);
      out += specifier ? source.slice(i, j + 1) : `${c}${c}`;
      i = j + 1;
    } else if (c === '/' && /[=(,:;!&|?{}[\n]\s*$/.test(out.slice(-20))) {
      // A regular expression literal: skipped whole, so a quote or "//" in it is not misread.
      let j = i + 1;
      let inClass = false;
      while (j < source.length && source[j] !== '\n' && (inClass || source[j] !== '/')) {
        if (source[j] === '\\') j++;
        else if (source[j] === '[') inClass = true;
        else if (source[j] === ']') inClass = false;
        j++;
      }
      out += '/regex/';
      i = j + 1;
    } else {
      out += c;
      i++;
    }
  }
  return out;
}

const IMPORT_PATTERNS = [
  /(?:^|[;\n])\s*import\s+(?:[\w*{}\s,$]+?\s+from\s+)?['"]([^'"]+)['"]/g, // import x from '...'; import '...'
  /(?:^|[;\n])\s*export\s+(?:\*|\{[^}]*\})(?:\s+as\s+\w+)?\s+from\s+['"]([^'"]+)['"]/g, // export { x } from '...'
  /\bimport\(\s*['"]([^'"]+)['"]\s*\)/g, // import('...')
  /\brequire\(\s*['"]([^'"]+)['"]\s*\)/g, // require('...')
];

/** The specifiers a source imports (static and dynamic, with a literal specifier). */
export function importsOf(source) {
  const code = withoutComments(source);
  const found = new Set();
  for (const pattern of IMPORT_PATTERNS) for (const m of code.matchAll(pattern)) found.add(m[1]);
  return [...found];
}

const rel = (path) => relative(ROOT, path).split(sep).join('/');

/** Every source file and the files of the package it imports: Map<'lib/x.js', Set<'lib/y.js'>>. */
function importGraph() {
  const graph = new Map();
  for (const file of SOURCE_FOLDERS.flatMap((f) => sourceFiles(join(ROOT, f)))) {
    const edges = new Set();
    for (const spec of importsOf(readFileSync(file, 'utf8'))) {
      if (!spec.startsWith('.')) continue; // node: builtins and packages
      edges.add(rel(resolve(dirname(file), spec)));
    }
    graph.set(rel(file), edges);
  }
  return graph;
}

/** The cycles of a graph, one per strongly connected component with more than one file (or a self-import). */
export function cyclesOf(graph) {
  let index = 0;
  const stack = [];
  const meta = new Map();
  const cycles = [];
  const connect = (v) => {
    meta.set(v, { index, low: index, onStack: true });
    index++;
    stack.push(v);
    for (const w of graph.get(v) ?? []) {
      if (!graph.has(w)) continue;
      if (!meta.has(w)) {
        connect(w);
        meta.get(v).low = Math.min(meta.get(v).low, meta.get(w).low);
      } else if (meta.get(w).onStack) meta.get(v).low = Math.min(meta.get(v).low, meta.get(w).index);
    }
    if (meta.get(v).low === meta.get(v).index) {
      const component = [];
      let w;
      do {
        w = stack.pop();
        meta.get(w).onStack = false;
        component.push(w);
      } while (w !== v);
      if (component.length > 1 || graph.get(v)?.has(v)) cycles.push(component.sort());
    }
  };
  for (const v of graph.keys()) if (!meta.has(v)) connect(v);
  return cycles;
}

/** Every file reachable from `from` (its imports, theirs, ...). */
function reachable(graph, from) {
  const seen = new Set();
  const todo = [...(graph.get(from) ?? [])];
  while (todo.length) {
    const f = todo.pop();
    if (seen.has(f)) continue;
    seen.add(f);
    todo.push(...(graph.get(f) ?? []));
  }
  return seen;
}

const graph = importGraph();
const filesUnder = (folder) => [...graph.keys()].filter((f) => f.startsWith(`${folder}/`));
/** [importer, imported] pairs where importer is under `from` and imported matches `to`. */
const edges = (from, to) => filesUnder(from).flatMap((f) => [...graph.get(f)].filter(to).map((t) => [f, t]));
const under = (...folders) => (f) => folders.some((folder) => f.startsWith(`${folder}/`));

describe('how the imports are read', () => {
  test('static, re-exported, dynamic and required imports count; those in comments and strings do not', () => {
    const source = [
      "import a from './a.js';",
      "import { b,\n  c } from '../b.js';",
      "import './side-effect.js';",
      "export { d } from './d.js';",
      "export * from './e.js';",
      "const f = await import('./f.js');",
      "const g = require('./g.cjs');",
      "/** @param {import('./not-a.js').T} t */",
      "// import x from './not-b.js';",
      "const text = \"import y from './not-c.js'\";",
      "const re = /\\/\\/ import('.\\/not-d.js')/;",
      "console.log(\"http://example.com\"); import('./h.js');",
    ].join('\n');
    expect(importsOf(source).sort()).toEqual(['../b.js', './a.js', './d.js', './e.js', './f.js', './g.cjs', './h.js', './side-effect.js']);
  });

  test('a cycle is found, over two files and over three; a chain is not one', () => {
    const g = (pairs) => new Map(Object.entries(pairs).map(([k, v]) => [k, new Set(v)]));
    expect(cyclesOf(g({ a: ['b'], b: ['a'], c: ['a'] }))).toEqual([['a', 'b']]);
    expect(cyclesOf(g({ a: ['b'], b: ['c'], c: ['a'] }))).toEqual([['a', 'b', 'c']]);
    expect(cyclesOf(g({ a: ['b'], b: ['c'], c: [] }))).toEqual([]);
  });

  test('the graph covers the package: the CLI, the harness, the verifiers and the scripts', () => {
    expect(graph.get('bin/cluster-workshop.js').size).toBeGreaterThan(0);
    expect(graph.get('lib/harness/runner.js')).toContain('lib/harness/context.js');
    expect(filesUnder('verify').length).toBeGreaterThan(10);
    expect(filesUnder('lib/cli/commands').length).toBeGreaterThan(10);
  });
});

describe('the layers', () => {
  test('no import cycle anywhere', () => {
    expect(cyclesOf(graph)).toEqual([]);
  });

  test('the harness imports neither the CLI, the course layer nor the classroom, directly or through another file', () => {
    expect(edges('lib/harness', under('lib/cli', 'lib/course', 'lib/classroom'))).toEqual([]);
    const reached = filesUnder('lib/harness').flatMap((f) => [...reachable(graph, f)].filter(under('lib/cli', 'lib/course', 'lib/classroom')).map((t) => [f, t]));
    expect(reached).toEqual([]);
  });

  test('the harness knows no lesson: it reads neither the manifest nor the progress', () => {
    expect(edges('lib/harness', (f) => ['lib/manifest.js', 'lib/progress.js', 'lib/workspace.js'].includes(f))).toEqual([]);
  });

  test('no command imports another command', () => {
    expect(edges('lib/cli/commands', under('lib/cli/commands'))).toEqual([]);
  });

  test('the classroom does not import the harness', () => {
    expect(edges('lib/classroom', under('lib/harness'))).toEqual([]);
  });
});
