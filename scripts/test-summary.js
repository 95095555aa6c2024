// The closing lines of `npm test` (scripts/test.js): the 15 slowest test
// files with their seconds, the total, and every failed test with the lines
// that explain it, so that a CI log is read from its last screen.
import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = fileURLToPath(new URL('..', import.meta.url));

/** ANSI colours out, so the explanation reads as text in a CI log. */
const plain = (s) => s.replace(/\x1b\[[0-9;]*m/g, '');

/** The lines of a jest failure that explain it: the message and the first lines of the code frame, no stack. */
function explainingLines(message, max = 14) {
  return plain(message)
    .split('\n')
    .filter((l) => !/^\s+at /.test(l))
    .map((l) => l.trimEnd())
    .filter((l, i, all) => l || (i > 0 && all[i - 1]))
    .slice(0, max);
}

/**
 * The closing summary, from each piece's name, exit code and jest JSON report
 * (null when it wrote none).
 */
export function summary(pieces, root = ROOT) {
  const files = [];
  const failures = [];
  for (const { name: pieceName, code, report } of pieces) {
    const piece = { name: pieceName };
    if (!report) {
      if (code !== 0) failures.push({ name: `${piece.name}: ended with exit code ${code} and wrote no test results`, lines: ['its own lines above show why (look for its name in brackets)'] });
      continue;
    }
    for (const r of report.testResults) {
      files.push({ name: relative(root, r.name), seconds: (r.endTime - r.startTime) / 1000, piece: piece.name });
      const failed = r.assertionResults.filter((a) => a.status === 'failed');
      for (const a of failed) failures.push({ name: `[${piece.name}] ${relative(root, r.name)} › ${a.fullName}`, lines: explainingLines(a.failureMessages.join('\n')) });
      if (!failed.length && r.status === 'failed') failures.push({ name: `[${piece.name}] ${relative(root, r.name)}`, lines: explainingLines(r.message || r.failureMessage || 'the file failed to run') });
    }
  }
  const out = [];
  const total = files.reduce((s, f) => s + f.seconds, 0);
  out.push(`The 15 slowest test files (of ${files.length}; ${Math.round(total)} s in all, across the lanes):`);
  for (const f of [...files].sort((a, b) => b.seconds - a.seconds).slice(0, 15)) {
    out.push(`  ${f.seconds.toFixed(0).padStart(5)} s  ${f.name}  [${f.piece}]`);
  }
  if (failures.length) {
    out.push('', `${failures.length} FAILED:`);
    for (const f of failures) out.push('', `  ✕ ${f.name}`, ...f.lines.map((l) => `      ${l}`));
  } else {
    out.push('', 'Every test passed.');
  }
  return out.join('\n');
}
