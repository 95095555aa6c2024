// The dev check over the manifest (as rustlings does): every lesson has its
// text, starter, solution, verifier and hints; no file belongs to no lesson;
// every solution passes its verifier and every starter fails it.
import { readdirSync, readFileSync, existsSync } from 'node:fs';
import { join } from 'node:path';
import { loadLessons, PACKAGE_ROOT } from '../lib/manifest.js';
import { verifyFile, leftovers, verdictOf, PASSED } from './helpers/verify.js';

const lessons = loadLessons();
const COURSE = ['bottleneck', 'fork', 'respawn', 'broadcast', 'graceful-shutdown', 'rolling-restart', 'shared-state', 'redis-state', 'sticky-sessions', 'health-check', 'capstone'];

describe('the manifest', () => {
  test('lists lessons in course order with unique ids', () => {
    const ids = lessons.map((l) => l.id);
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids).toEqual(COURSE.slice(0, ids.length));
  });

  test.each(lessons.map((l) => [l.slug, l]))('%s has its text, starter, solution, verifier and hints', (slug, lesson) => {
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
    const slugs = new Set(lessons.map((l) => l.slug));
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
    const { loadVerifier } = await import('../lib/manifest.js');
    for (const lesson of lessons) {
      const verifier = await loadVerifier(lesson);
      const stepIds = new Set(['starts', ...(verifier.before ?? []).map((s) => s.id), ...verifier.steps.map((s) => s.id)]);
      for (const hint of lesson.hints) {
        for (const step of hint.steps ?? []) expect({ lesson: lesson.id, step, known: stepIds.has(step) }).toEqual({ lesson: lesson.id, step, known: true });
      }
    }
  });
});

describe.each(lessons.map((l) => [l.slug, l]))('%s', (slug, lesson) => {
  test('the reference solution passes its verifier', async () => {
    const result = await verifyFile(lesson.id, lesson.paths.solution);
    expect(verdictOf(result)).toMatch(PASSED);
    expect(leftovers()).toEqual([]);
  });

  test('the exercise starter boots but fails its verifier', async () => {
    const result = await verifyFile(lesson.id, lesson.paths.exercise);
    expect(result.report.passed).toBe(false);
    // It boots: the failure comes after the start step.
    expect(verdictOf(result)).toMatch(/^verdict: failed at /);
    expect(verdictOf(result)).not.toMatch(/^verdict: failed at starts\n/);
    expect(leftovers()).toEqual([]);
  });
});
