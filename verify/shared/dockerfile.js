// A Dockerfile read the way Docker reads it, enough for the containers
// lesson's static checks: line continuations, comments, instructions of the
// final stage (after the last FROM), exec form (a JSON array) or shell form.
import { readFileSync } from 'node:fs';

/**
 * @returns {{ instructions: { name: string, args: string, line: number }[], text: string }}
 *   the final stage's instructions, name upper-cased; line: where it starts (1-based)
 */
export function parseDockerfile(text) {
  const all = [];
  const lines = text.split(/\r?\n/);
  let current = null;
  for (const [i, raw] of lines.entries()) {
    const trimmed = raw.trim();
    if (!current && (trimmed === '' || trimmed.startsWith('#'))) continue;
    if (current && trimmed.startsWith('#')) continue; // comments inside a continuation are dropped
    const body = (trimmed.endsWith('\\') ? trimmed.slice(0, -1) : trimmed).trimEnd();
    if (current) current.args += ` ${body}`;
    else {
      const m = /^(\w+)\s*(.*)$/.exec(body);
      if (!m) continue;
      current = { name: m[1].toUpperCase(), args: m[2], line: i + 1 };
    }
    if (!trimmed.endsWith('\\')) {
      current.args = current.args.trim();
      all.push(current);
      current = null;
    }
  }
  if (current) all.push({ ...current, args: current.args.trim() });
  const lastFrom = all.map((x) => x.name).lastIndexOf('FROM');
  return { instructions: all.slice(lastFrom + 1), text };
}

export function readDockerfile(file) {
  return parseDockerfile(readFileSync(file, 'utf8'));
}

/** The exec form's array, or null for the shell form. */
export function execForm(args) {
  if (!args.startsWith('[')) return null;
  try {
    const v = JSON.parse(args);
    return Array.isArray(v) && v.every((x) => typeof x === 'string') ? v : null;
  } catch {
    return null; // Docker runs an array that is not valid JSON in the shell form
  }
}

/** The last instruction of that name in the final stage, or undefined. */
export function lastOf(dockerfile, name) {
  return dockerfile.instructions.filter((x) => x.name === name).at(-1);
}

/**
 * The variables ENV sets: `ENV A=1 B="2"` and the old `ENV A 1`.
 * @returns {Map<string, { value: string, line: number }>}
 */
export function envOf(dockerfile) {
  const vars = new Map();
  for (const x of dockerfile.instructions.filter((i) => i.name === 'ENV')) {
    if (!/^[\w.-]+=/.test(x.args)) {
      const [name, ...rest] = x.args.split(/\s+/);
      vars.set(name, { value: unquote(rest.join(' ')), line: x.line });
      continue;
    }
    for (const m of x.args.matchAll(/([\w.-]+)=("(?:[^"\\]|\\.)*"|'[^']*'|\S*)/g)) vars.set(m[1], { value: unquote(m[2]), line: x.line });
  }
  return vars;
}

function unquote(s) {
  return s.replace(/^"(.*)"$/, '$1').replace(/^'(.*)'$/, '$1');
}
