// The state file and the journal are checked as strictly as a learner's
// report: a file edited by hand, damaged on disk or written by another
// version must stop the start with a sentence naming what is wrong (never a
// stack trace, never "Join code: undefined"), and a journal line that parses
// but is not a well-formed operation is set aside like an unreadable one.
import { validateName } from './validate.js';

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const isTime = (v) => typeof v === 'string' && v.length <= 40 && Number.isFinite(Date.parse(v));
const isCount = (v) => Number.isInteger(v) && v >= 0;
const isStepId = (v) => typeof v === 'string' && v.length <= 64;
const LEARNER_ID = /^l[1-9]\d{0,8}$/;
const KEY_HASH = /^[0-9a-f]{64}$/;
const JOIN_CODE = /^[A-Z2-9]{6}$/;
const TOKEN = /^[0-9a-f]{32}$/;

function lessonProblem(l) {
  if (!isObject(l)) return 'is not an object';
  for (const k of ['attempts', 'reports', 'streak']) if (!isCount(l[k])) return `${k} is not a whole number`;
  for (const k of ['passedAt', 'lastAt']) if (l[k] !== null && !isTime(l[k])) return `${k} is not a time`;
  if (l.lastPassed !== null && typeof l.lastPassed !== 'boolean') return 'lastPassed is not true, false or null';
  for (const k of ['lastFailedStep', 'streakStep']) if (l[k] !== null && !isStepId(l[k])) return `${k} is not a step id`;
  if (l.furthestStep !== undefined && !(Number.isInteger(l.furthestStep) && l.furthestStep >= -1)) return 'furthestStep is not a step position';
  if (!isObject(l.fails) || !Object.entries(l.fails).every(([k, n]) => isStepId(k) && isCount(n))) return 'fails is not a count per step';
  return null;
}

function learnerProblem(id, l) {
  if (!isObject(l)) return 'is not an object';
  if (l.id !== id || !LEARNER_ID.test(id)) return `has id ${JSON.stringify(l.id)} under the key ${JSON.stringify(id)}`;
  const name = validateName(l.name);
  if (name.error) return `has no valid name (${name.error})`;
  if (typeof l.keyHash !== 'string' || !KEY_HASH.test(l.keyHash)) return 'has no valid key hash';
  if (!isTime(l.joinedAt) || !isTime(l.lastProgressAt)) return 'has no valid joinedAt or lastProgressAt';
  if (l.lastReportAt !== null && !isTime(l.lastReportAt)) return 'has a lastReportAt that is not a time';
  if (l.lastLesson !== null && typeof l.lastLesson !== 'string') return 'has a lastLesson that is not a lesson id';
  if (!Array.isArray(l.recentIds) || !l.recentIds.every((r) => typeof r === 'string')) return 'has no list of recent report ids';
  if (l.rejoinAllowed !== undefined && typeof l.rejoinAllowed !== 'boolean') return 'has a rejoinAllowed that is not true or false';
  if (!isObject(l.lessons)) return 'has no lessons object';
  for (const [lesson, totals] of Object.entries(l.lessons)) {
    const p = lessonProblem(totals);
    if (p) return `lesson ${lesson}: ${p}`;
  }
  return null;
}

/** What is wrong with a parsed state file, as a phrase; null when it is sound. */
export function stateProblem(s, version) {
  if (!isObject(s)) return 'it does not hold a JSON object';
  if (s.version !== version) return `its version is ${JSON.stringify(s.version)}, this classroom reads version ${version}`;
  if (typeof s.joinCode !== 'string' || !JOIN_CODE.test(s.joinCode)) return 'it has no valid join code';
  if (typeof s.instructorToken !== 'string' || !TOKEN.test(s.instructorToken)) return 'it has no valid instructor token';
  if (typeof s.title !== 'string' || s.title.length === 0 || s.title.length > 200) return 'it has no valid title';
  if (!isTime(s.createdAt)) return 'its createdAt is not a time';
  if (!Number.isInteger(s.nextLearner) || s.nextLearner < 1) return 'its nextLearner is not a whole number from 1';
  if (s.seq !== undefined && !isCount(s.seq)) return 'its seq is not a whole number';
  if (!isObject(s.learners)) return 'its learners is not an object';
  const names = new Set();
  for (const [id, l] of Object.entries(s.learners)) {
    const p = learnerProblem(id, l);
    if (p) return `learner ${id} ${p}`;
    const key = l.name.toLowerCase();
    if (names.has(key)) return `two learners are called "${l.name}"`;
    names.add(key);
  }
  if (!Array.isArray(s.history) || !s.history.every((h) => isObject(h) && typeof h.learner === 'string' && typeof h.lesson === 'string')) return 'its history is not a list of attempts';
  return null;
}

function reportProblem(r) {
  if (!isObject(r)) return 'a report is not an object';
  if (typeof r.id !== 'string' || typeof r.lesson !== 'string' || typeof r.passed !== 'boolean') return 'a report has no id, lesson or passed';
  if (r.passed ? r.failedStep !== null : !isStepId(r.failedStep)) return 'a report has a wrong failedStep';
  if (!isCount(r.durationMs) || !Number.isInteger(r.attempt) || r.attempt < 1) return 'a report has a wrong duration or attempt';
  const sent = r.sentAt ?? r.at;
  if (sent !== null && sent !== undefined && !isTime(sent)) return 'a report has a wrong time';
  return null;
}

/** What is wrong with a parsed journal operation; null when it can be applied. */
export function operationProblem(op) {
  if (!isObject(op)) return 'not an object';
  if (!Number.isInteger(op.seq) || op.seq < 1) return 'no sequence number';
  switch (op.op) {
    case 'join':
      if (!LEARNER_ID.test(op.id ?? '') || validateName(op.name).error || !KEY_HASH.test(op.keyHash ?? '') || !isTime(op.at)) return 'a join without id, name, key or time';
      return null;
    case 'reports':
      if (typeof op.learner !== 'string' || !isTime(op.receivedAt) || !Array.isArray(op.reports)) return 'reports without learner, time or list';
      return op.reports.map(reportProblem).find(Boolean) ?? null;
    case 'rekey':
      if (typeof op.learner !== 'string' || !KEY_HASH.test(op.keyHash ?? '') || !isTime(op.at)) return 'a rejoin without learner, key or time';
      return null;
    case 'rename':
      return typeof op.learner === 'string' && !validateName(op.name).error ? null : 'a rename without learner or name';
    case 'remove':
    case 'allow-rejoin':
      return typeof op.learner === 'string' ? null : `${op.op} without learner`;
    default:
      return `unknown operation ${JSON.stringify(op.op)}`;
  }
}
