// What the dashboard concludes from learners' rows: cell status, who is stuck
// (3 failures in a row at one step, or no progress for N minutes), and
// the steps that fail most per lesson.
import { cellStatus, stuckReasons, describeReason, failingSteps } from '../lib/classroom/public/insights.js';

const lessons = [
  { id: 'bottleneck', number: 1, optional: false, steps: { starts: 'starts' } },
  { id: 'fork', number: 2, optional: false, steps: { 'worker-count': 'the primary has exactly 3 workers' } },
  { id: 'redis-state', number: 3, optional: true, steps: {} },
];
const T0 = Date.parse('2026-01-01T10:00:00Z');
const iso = (minutes) => new Date(T0 + minutes * 60000).toISOString();
const lesson = (fields) => ({ attempts: 1, reports: 1, passedAt: null, lastPassed: false, lastFailedStep: 'worker-count', lastAt: iso(1), streak: 1, streakStep: 'worker-count', fails: { 'worker-count': 1 }, ...fields });
const row = (fields) => ({ id: 'l1', name: 'Ada', joinedAt: iso(0), lastProgressAt: iso(0), lastLesson: null, lessons: {}, ...fields });

test('cell status: not started, failing, and passed for good once passed', () => {
  expect(cellStatus(undefined)).toBe('not-started');
  expect(cellStatus(lesson({}))).toBe('failing');
  expect(cellStatus(lesson({ passedAt: iso(2), lastPassed: false }))).toBe('passed');
});

test('three failures in a row at one step on the current lesson make a learner stuck', () => {
  const opts = { now: T0 + 60000 * 3, minutes: 10, lessons };
  expect(stuckReasons(row({ lastLesson: 'fork', lessons: { fork: lesson({ streak: 2 }) } }), opts)).toEqual([]);
  const stuck = stuckReasons(row({ lastLesson: 'fork', lessons: { fork: lesson({ streak: 3 }) } }), opts);
  expect(stuck).toEqual([{ kind: 'failures', lesson: 'fork', step: 'worker-count', count: 3 }]);
  expect(describeReason(stuck[0], lessons)).toBe('3 failures in a row at "the primary has exactly 3 workers" (lesson 2 fork)');
  // Having moved on to another lesson, they are not stuck on the old one.
  expect(stuckReasons(row({ lastLesson: 'bottleneck', lessons: { fork: lesson({ streak: 5 }), bottleneck: lesson({ streak: 1, streakStep: 'starts' }) } }), opts)).toEqual([]);
});

test('no progress for the chosen minutes makes a learner stuck, unless every required lesson is done', () => {
  const idle = row({ lastProgressAt: iso(0) });
  expect(stuckReasons(idle, { now: T0 + 9 * 60000, minutes: 10, lessons })).toEqual([]);
  expect(stuckReasons(idle, { now: T0 + 12 * 60000, minutes: 10, lessons })).toEqual([{ kind: 'idle', minutes: 12 }]);
  expect(stuckReasons(idle, { now: T0 + 12 * 60000, minutes: 15, lessons })).toEqual([]);
  expect(stuckReasons(idle, { now: T0 + 12 * 60000, minutes: 0, lessons })).toEqual([]);
  const finished = row({ lessons: { bottleneck: lesson({ passedAt: iso(1) }), fork: lesson({ passedAt: iso(2) }) } });
  expect(stuckReasons(finished, { now: T0 + 60 * 60000, minutes: 10, lessons })).toEqual([]);
});

test('failing steps: most learners first, then most failures', () => {
  const rows = [
    row({ id: 'a', lessons: { fork: lesson({ fails: { 'worker-count': 5 } }) } }),
    row({ id: 'b', lessons: { fork: lesson({ fails: { 'primary-serves-nothing': 1, 'worker-count': 1 } }) } }),
    row({ id: 'c', lessons: { fork: lesson({ fails: { 'primary-serves-nothing': 1 } }) } }),
    row({ id: 'd', lessons: { fork: lesson({ fails: { spread: 9 } }) } }),
  ];
  expect(failingSteps(rows, lessons).fork).toEqual([
    { step: 'worker-count', learners: 2, failures: 6 },
    { step: 'primary-serves-nothing', learners: 2, failures: 2 },
    { step: 'spread', learners: 1, failures: 9 },
  ]);
  expect(failingSteps(rows, lessons).bottleneck).toEqual([]);
});

// Issue 14, item 10: what a projector shows.
test('names sort as people read numbers: Learner 2 before Learner 10 before Learner 100', async () => {
  const { byName } = await import('../lib/classroom/public/insights.js');
  const names = ['Learner 100', 'Learner 10', 'learner 2', 'Learner 1', 'Zoë', 'Ada'];
  expect([...names].sort((a, b) => byName({ name: a }, { name: b }))).toEqual(['Ada', 'Learner 1', 'learner 2', 'Learner 10', 'Learner 100', 'Zoë']);
});

test('the stuck list is capped, most stuck first, and says how many more', async () => {
  const { stuckList } = await import('../lib/classroom/public/insights.js');
  const rows = Array.from({ length: 12 }, (_, i) =>
    row({ id: `l${i}`, name: `L${i}`, lastLesson: 'fork', lastProgressAt: iso(60 - i), lessons: { fork: lesson({ streak: i % 4 === 0 ? 3 + i : 1 }) } }),
  );
  const { shown, more } = stuckList(rows, { now: T0 + 61 * 60000, minutes: 0, lessons, max: 2 });
  expect(shown.map((s) => s.row.id)).toEqual(['l8', 'l4']);
  expect(more).toBe(1);
  const idle = stuckList(rows, { now: T0 + 75 * 60000, minutes: 10, lessons, max: 5 });
  // Failures in a row first (most first), then the longest without progress.
  expect(idle.shown.map((s) => s.row.id)).toEqual(['l8', 'l4', 'l0', 'l11', 'l10']);
  expect(idle.more).toBe(7);
});

test('the steps that fail most, across lessons, most learners first', async () => {
  const { topFailingSteps } = await import('../lib/classroom/public/insights.js');
  const rows = [
    row({ id: 'a', lessons: { fork: lesson({ fails: { 'worker-count': 2 } }), bottleneck: lesson({ fails: { starts: 1 } }) } }),
    row({ id: 'b', lessons: { fork: lesson({ fails: { 'worker-count': 1 } }) } }),
  ];
  expect(topFailingSteps(rows, lessons, 5)).toEqual([
    { lesson: 'fork', step: 'worker-count', learners: 2, failures: 3 },
    { lesson: 'bottleneck', step: 'starts', learners: 1, failures: 1 },
  ]);
});
