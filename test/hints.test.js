// One set of hints, in the manifest, graded for each step: the first hint a
// learner gets about a step is a nudge (what to look at, no code), and the
// lesson text never prints the hints themselves, only how many there are and
// how to ask for them.
import { readFileSync } from 'node:fs';
import { loadLessons } from '../lib/manifest.js';
import { runCli } from './helpers/cli.js';

const lessons = loadLessons();
// Code in a hint: an arrow function, a block or statement, an assignment.
const looksLikeCode = /=>|[{};]| = /;

test.each(lessons.map((l) => [l.id, l]))('%s: the first hint about each step is a nudge, not code', (id, lesson) => {
  const seen = new Set();
  const answersFirst = [];
  for (const hint of lesson.hints) {
    const newSteps = hint.steps.filter((s) => !seen.has(s));
    if (newSteps.length && looksLikeCode.test(hint.text)) answersFirst.push({ steps: newSteps, text: hint.text });
    for (const s of hint.steps) seen.add(s);
  }
  expect(answersFirst).toEqual([]);
});

test.each(lessons.map((l) => [l.id, l]))("%s: the lesson text's Hints section only says how many and how to ask", (id, lesson) => {
  const text = readFileSync(lesson.paths.text, 'utf8');
  const section = text.split(/^## Hints\n/m)[1].split(/^## /m)[0].trim();
  expect(section.split('\n')).toHaveLength(1);
  expect(section).toContain('{{hint-count}} hints');
  expect(section).toContain('`{{cli}} hint`');
  expect(section).toContain('`{{cli}} hint --all`');
});

test('print shows the number of hints and the commands to get them, and none of the hints', async () => {
  const lesson = lessons.find((l) => l.id === 'respawn');
  const r = await runCli(['print', lesson.id], { cwd: process.cwd() });
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(new RegExp(`This lesson has ${lesson.hints.length} hints`));
  expect(r.stdout).toMatch(/`node \S+bin\/cluster-workshop\.js hint`/);
  expect(r.stdout).not.toContain('{{');
  for (const hint of lesson.hints) expect(r.stdout).not.toContain(hint.text);
});
