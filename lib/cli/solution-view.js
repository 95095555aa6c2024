// The reference solution as a learner compares it with their own program:
// the starter's TODOs (what the lesson asked for), then the solution with the
// lines it adds to the starter marked "+", so the eye goes to what matters.
import { readFileSync } from 'node:fs';

// Files longer than this show only the changed parts, with some context.
const WHOLE_FILE_LINES = 80;
const CONTEXT = 3;

/** The TODO comments of the starter, one string each (continuation comment lines joined). */
export function todosOf(starter) {
  const lines = starter.split(/\r?\n/);
  const todos = [];
  for (let i = 0; i < lines.length; i++) {
    const m = /\/\/\s*TODO:?\s*(.*)$/.exec(lines[i]);
    if (!m) continue;
    const parts = [m[1].trim()];
    while (i + 1 < lines.length && /^\s*\/\/(?!\s*TODO)/.test(lines[i + 1])) {
      parts.push(lines[++i].replace(/^\s*\/\/\s?/, '').trim());
    }
    todos.push(parts.filter(Boolean).join(' '));
  }
  return todos;
}

/** For each line of b, whether it is also in a (longest common subsequence of trimmed lines). */
export function addedLines(a, b) {
  const x = a.map((l) => l.trim());
  const y = b.map((l) => l.trim());
  const n = x.length;
  const m = y.length;
  const lcs = Array.from({ length: n + 1 }, () => new Uint16Array(m + 1));
  for (let i = n - 1; i >= 0; i--) {
    for (let j = m - 1; j >= 0; j--) lcs[i][j] = x[i] === y[j] ? lcs[i + 1][j + 1] + 1 : Math.max(lcs[i + 1][j], lcs[i][j + 1]);
  }
  const added = new Array(m).fill(true);
  for (let i = 0, j = 0; i < n && j < m; ) {
    if (x[i] === y[j]) {
      added[j] = false;
      i++;
      j++;
    } else if (lcs[i + 1][j] >= lcs[i][j + 1]) i++;
    else j++;
  }
  return added;
}

/** The solution's lines with numbers and "+" marks; only changed parts when the file is long. */
export function markedSolution(starter, solution, style) {
  const a = starter.replace(/\s+$/, '').split(/\r?\n/);
  const b = solution.replace(/\s+$/, '').split(/\r?\n/);
  const added = addedLines(a, b);
  const context = b.length <= WHOLE_FILE_LINES ? Infinity : CONTEXT;
  const near = (j) => added.slice(Math.max(0, j - context), j + context + 1).some(Boolean);
  const width = String(b.length).length;
  const out = [];
  let skipped = false;
  b.forEach((line, j) => {
    if (!near(j)) {
      skipped = true;
      return;
    }
    if (skipped && out.length) out.push(style.dim(`${' '.repeat(width)}   ...`));
    skipped = false;
    const number = String(j + 1).padStart(width);
    out.push(added[j] ? style.green(`${number} + ${line}`) : `${style.dim(number)}   ${line}`);
  });
  if (skipped) out.push(style.dim(`${' '.repeat(width)}   ...`));
  return out.join('\n');
}

/** The whole comparison block: what to compare, then the marked solution. */
export function solutionView(lesson, style, { showCommand } = {}) {
  const starter = readFileSync(lesson.paths.exercise, 'utf8');
  const solution = readFileSync(lesson.paths.solution, 'utf8');
  const points = lesson.compare ? [].concat(lesson.compare) : todosOf(starter);
  const lines = [];
  if (points.length) {
    lines.push(style.bold('What to compare:'));
    for (const p of points) lines.push(`  - ${p}`);
    lines.push('');
  }
  const added = addedLines(starter.split(/\r?\n/), solution.split(/\r?\n/)).filter(Boolean).length;
  lines.push(
    style.bold(`The reference solution (${lesson.id}/server.js)`) +
      style.dim(`, the ${added} line${added === 1 ? '' : 's'} it adds to the starter marked +${showCommand ? `; whole file: ${showCommand}` : ''}:`),
  );
  lines.push(markedSolution(starter, solution, style));
  return `${lines.join('\n')}\n`;
}

// After a pass: a short look, not the whole file (the solution command shows that).
const SHORT_DIFF_LINES = 24;

/**
 * The code lines the reference adds to the starter (comment-only and blank
 * lines left out), numbered as in the solution, "..." where lines are
 * skipped, at most `limit` of them; then how many more there are.
 */
export function shortDiff(starter, solution, style, { limit = SHORT_DIFF_LINES } = {}) {
  const b = solution.replace(/\s+$/, '').split(/\r?\n/);
  const added = addedLines(starter.replace(/\s+$/, '').split(/\r?\n/), b);
  const code = b.map((line, j) => ({ line, j })).filter(({ line, j }) => added[j] && line.trim() && !/^\s*(\/\/|\/\*|\*)/.test(line));
  const width = String(b.length).length;
  const out = [];
  let previous = -1;
  for (const { line, j } of code.slice(0, limit)) {
    if (previous >= 0 && j > previous + 1) out.push(style.dim(`${' '.repeat(width)}   ...`));
    out.push(style.green(`${String(j + 1).padStart(width)} + ${line}`));
    previous = j;
  }
  const more = code.length - Math.min(code.length, limit);
  return { text: out.join('\n'), shown: Math.min(code.length, limit), more };
}

/** What a pass shows: what to compare, and the short diff of what the reference adds, with the command for all of it. */
export function passView(lesson, style, { showCommand, starter = readFileSync(lesson.paths.exercise, 'utf8') } = {}) {
  const solution = readFileSync(lesson.paths.solution, 'utf8');
  const points = lesson.compare ? [].concat(lesson.compare) : todosOf(starter);
  const lines = [];
  if (points.length) {
    lines.push(style.bold('What to compare:'));
    for (const p of points) lines.push(`  - ${p}`);
    lines.push('');
  }
  const diff = shortDiff(starter, solution, style);
  lines.push(style.bold(`What the reference solution (${lesson.id}/server.js) adds to the starter`) + style.dim(', its code lines:'));
  if (diff.text) lines.push(diff.text);
  const rest = diff.more ? `${diff.more} more added line${diff.more === 1 ? '' : 's'}, its comments and ` : 'its comments and ';
  lines.push(style.dim(`${rest}the whole file: ${showCommand}`));
  return `${lines.join('\n')}\n`;
}
