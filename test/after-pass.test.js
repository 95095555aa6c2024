// After a pass the learner sees what the reference adds, short, and the
// command that shows all of it, not the whole reference file unasked.
import { readFileSync } from 'node:fs';
import { findLesson } from '../lib/manifest.js';
import { afterPass } from '../lib/cli/after-pass.js';

const io = { stdout: { isTTY: false }, env: { PATH: '' }, cwd: process.cwd() };

test('a long reference (capstone): at most 24 added code lines, how many more, and the solution command', () => {
  const lesson = findLesson('capstone');
  const text = afterPass(lesson, { io });
  const added = text.split('\n').filter((l) => /^\s*\d+ \+ /.test(l));
  expect(added.length).toBeGreaterThan(5);
  expect(added.length).toBeLessThanOrEqual(24);
  // The lesson's number comes from the manifest, so a new lesson before it does not break this.
  expect(text).toMatch(new RegExp(`\\d+ more added lines, its comments and the whole file: node \\S+ solution ${lesson.number}\\n`));
  const solution = readFileSync(lesson.paths.solution, 'utf8').split('\n');
  expect(text.split('\n').length).toBeLessThan(solution.length / 3);
  // Comments of the reference are left to the solution command.
  for (const comment of solution.filter((l) => /^\s*\/\/ \S.{20,}/.test(l)).slice(0, 10)) expect(text).not.toContain(comment.trim());
});

test('a short reference (bottleneck): every line it adds to the starter, with the solution command', () => {
  const text = afterPass(findLesson('bottleneck'), { io });
  expect(text).toMatch(/^\s*\d+ \+ {3}while \(Date\.now\(\) < end\) \{$/m);
  expect(text).not.toMatch(/more added line/);
  expect(text).toMatch(/its comments and the whole file: node \S+ solution 1/);
});
