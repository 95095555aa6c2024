// What the dashboard reads out of the learners' rows: each cell's status, who
// is stuck and why, and the steps that fail most per lesson. Plain functions
// with no DOM, so the browser page and the server's export (and the tests)
// share them. Served to the browser as an ES module: keep it dependency-free.

export const STUCK_FAILURES = 3;

/** 'passed', 'failing' or 'not-started'. Once passed, a lesson stays passed. */
export function cellStatus(lesson) {
  if (!lesson || lesson.reports === 0) return 'not-started';
  return lesson.passedAt ? 'passed' : 'failing';
}

/**
 * Why a learner looks stuck, as a list of reasons (empty: not stuck):
 *  - { kind: 'failures', lesson, step, count }: the lesson they work on failed
 *    STUCK_FAILURES times or more in a row at the same step;
 *  - { kind: 'idle', minutes }: no progress for `minutes` or more, while
 *    required lessons remain. Progress (lastProgressAt, stamped by the
 *    server when a report arrives) is joining, passing a lesson, or a verify
 *    that gets further in a lesson than any before it.
 */
export function stuckReasons(row, { now, minutes, lessons }) {
  const reasons = [];
  const current = row.lastLesson && row.lessons[row.lastLesson];
  if (current && !current.passedAt && current.streak >= STUCK_FAILURES) {
    reasons.push({ kind: 'failures', lesson: row.lastLesson, step: current.streakStep, count: current.streak });
  }
  const required = lessons.filter((l) => !l.optional);
  const finished = required.every((l) => row.lessons[l.id]?.passedAt);
  const idleMs = now - Date.parse(row.lastProgressAt);
  if (!finished && minutes > 0 && idleMs >= minutes * 60000) {
    reasons.push({ kind: 'idle', minutes: Math.floor(idleMs / 60000) });
  }
  return reasons;
}

export function describeReason(reason, lessons) {
  if (reason.kind === 'idle') return `no progress for ${reason.minutes} min`;
  const lesson = lessons.find((l) => l.id === reason.lesson);
  const step = stepTitle(lesson, reason.step);
  return `${reason.count} failures in a row at "${step}" (lesson ${lesson?.number ?? '?'} ${reason.lesson})`;
}

/**
 * Per lesson, its failed steps, most learners first:
 * { [lessonId]: [{ step, learners, failures }] }.
 */
export function failingSteps(rows, lessons) {
  const out = {};
  for (const lesson of lessons) {
    const byStep = new Map();
    for (const row of rows) {
      const fails = row.lessons[lesson.id]?.fails ?? {};
      for (const [step, n] of Object.entries(fails)) {
        const s = byStep.get(step) ?? { step, learners: 0, failures: 0 };
        s.learners += 1;
        s.failures += n;
        byStep.set(step, s);
      }
    }
    out[lesson.id] = [...byStep.values()].sort((a, b) => b.learners - a.learners || b.failures - a.failures || a.step.localeCompare(b.step));
  }
  return out;
}

/** How many learners passed each lesson. */
export function passCounts(rows, lessons) {
  return Object.fromEntries(lessons.map((l) => [l.id, rows.filter((r) => r.lessons[l.id]?.passedAt).length]));
}

// Names as people read them: "Learner 2" before "Learner 10", any case, any script.
const collator = new Intl.Collator(undefined, { numeric: true, sensitivity: 'base' });
export const byName = (a, b) => collator.compare(a.name, b.name) || (a.id ?? '').localeCompare(b.id ?? '');

/**
 * Who is stuck, most stuck first (failures in a row, most first; then the
 * longest without progress), at most `max` of them: { shown: [{ row, reasons }], more, total }.
 */
export function stuckList(rows, { now, minutes, lessons, max }) {
  const all = rows.map((row) => ({ row, reasons: stuckReasons(row, { now, minutes, lessons }) })).filter((s) => s.reasons.length);
  const failures = (s) => Math.max(0, ...s.reasons.filter((r) => r.kind === 'failures').map((r) => r.count));
  const idle = (s) => now - Date.parse(s.row.lastProgressAt);
  all.sort((a, b) => failures(b) - failures(a) || idle(b) - idle(a) || byName(a.row, b.row));
  return { shown: all.slice(0, max), more: Math.max(0, all.length - max), total: all.length };
}

/** The steps that fail for most learners, across lessons: what to explain to the whole room. */
export function topFailingSteps(rows, lessons, max) {
  const perLesson = failingSteps(rows, lessons);
  return lessons
    .flatMap((l) => perLesson[l.id].map((s) => ({ lesson: l.id, ...s })))
    .sort((a, b) => b.learners - a.learners || b.failures - a.failures)
    .slice(0, max);
}

/** A step's title, for a step id the lesson knows (never a property of Object). */
export function stepTitle(lesson, step) {
  return lesson?.steps && Object.hasOwn(lesson.steps, step) ? lesson.steps[step] : step;
}
