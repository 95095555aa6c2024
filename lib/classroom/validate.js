// Validation of everything a learner sends. Each function returns
// { value } or { error } with a message a learner can act on; nothing is
// stored until the whole request is valid.
import { LIMITS, NAME_MAX, TITLE_MAX } from './limits.js';

// Printable characters of any script (letters, marks, digits, punctuation,
// symbols) and single spaces: no control, format (bidi overrides, zero-width)
// or line-break characters. Names are shown escaped everywhere, so <, > and &
// are allowed and shown as typed.
const PRINTABLE = /^[\p{L}\p{M}\p{N}\p{P}\p{S}]+(?: [\p{L}\p{M}\p{N}\p{P}\p{S}]+)*$/u;
// The one format character a name may hold: the zero-width joiner between two
// emoji (👩‍💻, 👨‍👩‍👧), optionally after a variation selector or skin tone.
const EMOJI_ZWJ = /(?<=\p{Extended_Pictographic}[\u{FE0F}\u{1F3FB}-\u{1F3FF}]?)\u200D(?=\p{Extended_Pictographic})/gu;
// More combining marks in a row than any script needs (Vietnamese, Thai and
// Devanagari use at most two or three): "Zalgo" text that spills over the
// lines above and below it on the dashboard.
const MARK_PILE = /\p{M}{4,}/u;
const REPORT_ID = /^[A-Za-z0-9_-]{8,64}$/;
const MAX_DURATION_MS = 60 * 60 * 1000;
const MAX_ATTEMPTS = 1_000_000;

function isPlainObject(v) {
  return v !== null && typeof v === 'object' && !Array.isArray(v);
}

function unknownKeys(obj, allowed) {
  return Object.keys(obj).filter((k) => !allowed.includes(k));
}

export function validateName(raw, { what = 'name', max = NAME_MAX } = {}) {
  if (typeof raw !== 'string') return { error: `${what} must be a string` };
  const value = raw.normalize('NFC').trim().replace(/ +/g, ' ');
  const length = [...value].length;
  if (length === 0) return { error: `${what} is empty` };
  if (length > max) return { error: `${what} is longer than ${max} characters` };
  if (!PRINTABLE.test(value.replace(EMOJI_ZWJ, ''))) return { error: `${what} may hold letters, digits, punctuation and single spaces only` };
  if (MARK_PILE.test(value)) return { error: `${what} piles up more than three accents on one letter` };
  return { value };
}

export function validateTitle(raw) {
  return validateName(raw, { what: 'title', max: TITLE_MAX });
}

export function validateJoin(body) {
  if (!isPlainObject(body)) return { error: 'expected a JSON object { name }' };
  const extra = unknownKeys(body, ['name']);
  if (extra.length) return { error: `unexpected field ${extra[0]}` };
  const name = validateName(body.name);
  return name.error ? name : { value: { name: name.value } };
}

/**
 * One verify outcome: { id, lesson, passed, failedStep, durationMs, attempt, at }.
 * failedStep is null exactly when passed, else one of the lesson's step ids
 * (`lessons`: lesson id -> Set of its step ids, from the manifest). `at` is
 * the learner's clock: kept as sentAt, for information; the server stamps
 * the report when it arrives.
 */
export function validateReport(r, { lessons }) {
  if (!isPlainObject(r)) return { error: 'a report must be a JSON object' };
  const extra = unknownKeys(r, ['id', 'lesson', 'passed', 'failedStep', 'durationMs', 'attempt', 'at']);
  if (extra.length) return { error: `unexpected field ${extra[0]}` };
  if (typeof r.id !== 'string' || !REPORT_ID.test(r.id)) return { error: 'id must be 8-64 letters, digits, - or _' };
  if (typeof r.lesson !== 'string' || !lessons.has(r.lesson)) return { error: 'lesson is not a lesson of this course' };
  if (typeof r.passed !== 'boolean') return { error: 'passed must be true or false' };
  if (r.passed) {
    if (r.failedStep !== null && r.failedStep !== undefined) return { error: 'a passed report has no failedStep' };
  } else if (typeof r.failedStep !== 'string' || !lessons.get(r.lesson).has(r.failedStep)) {
    return { error: `failedStep is not a step of lesson ${r.lesson}` };
  }
  if (!Number.isInteger(r.durationMs) || r.durationMs < 0 || r.durationMs > MAX_DURATION_MS) return { error: 'durationMs must be a whole number of milliseconds up to one hour' };
  if (!Number.isInteger(r.attempt) || r.attempt < 1 || r.attempt > MAX_ATTEMPTS) return { error: 'attempt must be a whole number from 1' };
  if (typeof r.at !== 'string' || r.at.length > 40) return { error: 'at must be an ISO timestamp' };
  const at = Date.parse(r.at);
  if (!Number.isFinite(at) || !/^\d{4}-\d\d-\d\dT/.test(r.at)) return { error: 'at must be an ISO timestamp' };
  return {
    value: {
      id: r.id,
      lesson: r.lesson,
      passed: r.passed,
      failedStep: r.passed ? null : r.failedStep,
      durationMs: r.durationMs,
      attempt: r.attempt,
      sentAt: new Date(at).toISOString(),
    },
  };
}

/** The body of POST /api/reports: { learner, key, reports: [...] }. */
export function validateReportBatch(body, { lessons }) {
  if (!isPlainObject(body)) return { error: 'expected a JSON object { learner, key, reports }' };
  const extra = unknownKeys(body, ['learner', 'key', 'reports']);
  if (extra.length) return { error: `unexpected field ${extra[0]}` };
  if (!Array.isArray(body.reports) || body.reports.length === 0) return { error: 'reports must be a non-empty list' };
  if (body.reports.length > LIMITS.maxReportsPerRequest) return { error: `at most ${LIMITS.maxReportsPerRequest} reports per request` };
  const reports = [];
  for (const [i, r] of body.reports.entries()) {
    const checked = validateReport(r, { lessons });
    if (checked.error) return { error: `report ${i + 1}: ${checked.error}` };
    reports.push(checked.value);
  }
  return { value: reports };
}
