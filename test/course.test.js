// The dev check over the manifest (as rustlings does): every lesson has its
// text, starter, solution, verifier and hints; no file belongs to no lesson;
// every solution passes its verifier and every starter fails it.
import { readdirSync, readFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { loadLessons, PACKAGE_ROOT } from '../lib/manifest.js';
import { verifyFile, leftovers, verdictOf, PASSED } from './helpers/verify.js';
import { copyIntoPm2Workspace, lessonNeedsPm2 } from './helpers/pm2.js';

const lessons = loadLessons();
describe('the manifest', () => {
  test('names every lesson by a unique id that is a folder name, never a position', () => {
    const ids = lessons.map((l) => l.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const id of ids) expect({ id, ok: /^[a-z][a-z0-9]*(-[a-z0-9]+)*$/.test(id) }).toEqual({ id, ok: true });
    // The number is the place in the manifest, for display only.
    expect(lessons.map((l) => l.number)).toEqual(ids.map((_, i) => i + 1));
  });

  test("lists each lesson's steps exactly as its verifier runs them (the classroom reads titles from here)", async () => {
    const { loadVerifier } = await import('../lib/manifest.js');
    const { bootStep } = await import('../lib/harness/runner.js');
    for (const lesson of lessons) {
      const verifier = await loadVerifier(lesson);
      const runs = [...(verifier.before ?? []), bootStep, ...verifier.steps].map((s) => ({ id: s.id, title: s.title }));
      expect({ lesson: lesson.id, steps: lesson.steps }).toEqual({ lesson: lesson.id, steps: runs });
    }
  });

  test.each(lessons.map((l) => [l.id, l]))('%s has its text, starter, solution, verifier and hints', (slug, lesson) => {
    for (const path of [lesson.paths.text, lesson.paths.exercise, lesson.paths.solution, lesson.paths.verifier]) {
      expect({ path, exists: existsSync(path) }).toEqual({ path, exists: true });
    }
    expect(lesson.title.length).toBeGreaterThan(5);
    expect(lesson.hints.length).toBeGreaterThan(0);
    expect(readFileSync(lesson.paths.exercise, 'utf8')).toMatch(/\/\/ TODO/);
    // The lesson text states the contract a learner can pass from alone.
    const text = readFileSync(lesson.paths.text, 'utf8');
    expect(text).toMatch(/^## Contract/m);
    expect(text).toMatch(/nodejs\.org\/api\//);
  });

  test('no lesson file belongs to no lesson', () => {
    const slugs = new Set(lessons.map((l) => l.id));
    const stray = [];
    for (const f of readdirSync(join(PACKAGE_ROOT, 'lessons'))) {
      if (f !== 'manifest.json' && !slugs.has(f.replace(/\.md$/, ''))) stray.push(`lessons/${f}`);
    }
    for (const folder of ['exercises', 'solutions']) {
      for (const f of readdirSync(join(PACKAGE_ROOT, folder))) if (!slugs.has(f)) stray.push(`${folder}/${f}`);
    }
    for (const f of readdirSync(join(PACKAGE_ROOT, 'verify'))) {
      if (f !== 'shared' && !slugs.has(f.replace(/\.js$/, ''))) stray.push(`verify/${f}`);
    }
    expect(stray).toEqual([]);
  });

  test('every hint that names a step names a real step of its verifier', async () => {
    for (const lesson of lessons) {
      const stepIds = new Set(lesson.steps.map((s) => s.id));
      for (const hint of lesson.hints) {
        for (const step of hint.steps ?? []) expect({ lesson: lesson.id, step, known: stepIds.has(step) }).toEqual({ lesson: lesson.id, step, known: true });
      }
    }
  });
});

// A lesson that needs PM2 (process-manager) runs its programs from a
// workspace with PM2 installed, as a learner's (test/helpers/pm2.js).
const temporary = [];
afterAll(() => temporary.splice(0).forEach((dir) => rmSync(dir, { recursive: true, force: true })));
function runnable(lesson, file) {
  if (!lessonNeedsPm2(lesson)) return file;
  const root = mkdtempSync(join(tmpdir(), 'cw-course-'));
  temporary.push(root);
  return copyIntoPm2Workspace(dirname(file), lesson.id, root);
}

describe.each(lessons.map((l) => [l.id, l]))('%s', (slug, lesson) => {
  test('the reference solution passes its verifier', async () => {
    const result = await verifyFile(lesson.id, runnable(lesson, lesson.paths.solution));
    expect(verdictOf(result)).toMatch(PASSED);
    expect(leftovers()).toEqual([]);
  });

  test('the exercise starter boots but fails its verifier', async () => {
    const result = await verifyFile(lesson.id, runnable(lesson, lesson.paths.exercise));
    expect(result.report.passed).toBe(false);
    // It boots: the failure comes after the start step.
    expect(verdictOf(result)).toMatch(/^verdict: failed at /);
    expect(verdictOf(result)).not.toMatch(/^verdict: failed at starts\n/);
    expect(leftovers()).toEqual([]);
  });
});
