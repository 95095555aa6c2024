// The end-of-class export: CSV (one row per learner and lesson, for a
// spreadsheet) and JSON (everything, with the attempt history).
import { cellStatus } from './public/insights.js';

const CSV_COLUMNS = ['learner', 'lesson_number', 'lesson', 'status', 'attempts', 'passed_at', 'last_failed_step', 'failures_in_a_row', 'last_report_at', 'joined_at'];

/** One CSV field: quoted when needed; a leading = + - @ is defused so a spreadsheet never runs it as a formula. */
export function csvField(value) {
  let s = value === null || value === undefined ? '' : String(value);
  if (/^[=+\-@\t\r]/.test(s)) s = `'${s}`;
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

export function toCsv(rows, lessons) {
  const lines = [CSV_COLUMNS.join(',')];
  const sorted = [...rows].sort((a, b) => a.name.localeCompare(b.name));
  for (const row of sorted) {
    for (const lesson of lessons) {
      const l = row.lessons[lesson.id];
      const status = cellStatus(l);
      lines.push(
        [
          row.name,
          lesson.number,
          lesson.id,
          status,
          l?.attempts ?? 0,
          l?.passedAt ?? '',
          status === 'failing' ? l.lastFailedStep : '',
          l?.streak ?? 0,
          l?.lastAt ?? '',
          row.joinedAt,
        ]
          .map(csvField)
          .join(','),
      );
    }
  }
  return `${lines.join('\r\n')}\r\n`;
}

export function toJson({ title, createdAt, lessons, rows, history, now }) {
  return {
    title,
    createdAt,
    exportedAt: new Date(now).toISOString(),
    lessons: lessons.map(({ id, number, title: t, optional, steps }) => ({ id, number, title: t, optional, steps })),
    learners: rows.map((r) => ({ ...r, lessons: Object.fromEntries(Object.entries(r.lessons).map(([id, l]) => [id, { status: cellStatus(l), ...l }])) })),
    history,
  };
}
