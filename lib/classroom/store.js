// The class's state: learners, their per-lesson totals and a bounded history
// of attempts. Every change is a numbered operation, appended to a journal
// (<state file>.journal, one JSON line each) before the request that made it
// is answered; now and then, and at every start and stop, the whole state is
// written as a snapshot (a temporary file, then rename: atomic) and the
// journal emptied. A start loads the snapshot and replays the journal's
// operations numbered after it, so a restart, even after kill -9, loses no
// result it acknowledged. A line cut short by a crash was never acknowledged
// and is dropped. Appending keeps each acknowledgement cheap however large
// the class grows; rewriting the whole state per report did not.
import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { open as openFile, rename, unlink, writeFile } from 'node:fs/promises';
import { dirname } from 'node:path';
import { LIMITS } from './limits.js';

export const STATE_VERSION = 1;
// Journal lines after which the state is written whole and the journal emptied.
const COMPACT_EVERY = 2000;
// No 0/O, 1/I/L: the code is read off a projector.
const CODE_ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';
const CODE_LENGTH = 6;

export class StateFileError extends Error {}

export function newJoinCode() {
  let code = '';
  for (let i = 0; i < CODE_LENGTH; i++) code += CODE_ALPHABET[randomInt(CODE_ALPHABET.length)];
  return code;
}

const hash = (s) => createHash('sha256').update(String(s)).digest();

/** Compares secrets in constant time (hashing first makes the lengths equal). */
export function sameSecret(given, expected) {
  if (typeof given !== 'string' || typeof expected !== 'string') return false;
  return timingSafeEqual(hash(given), hash(expected));
}

const nameKey = (name) => name.toLowerCase();

function newState({ title, now }) {
  return {
    version: STATE_VERSION,
    title,
    createdAt: new Date(now).toISOString(),
    joinCode: newJoinCode(),
    instructorToken: randomBytes(16).toString('hex'),
    nextLearner: 1,
    seq: 0,
    learners: {},
    history: [],
  };
}

function emptyLesson() {
  return { attempts: 0, reports: 0, passedAt: null, lastPassed: null, lastFailedStep: null, lastAt: null, streak: 0, streakStep: null, fails: {} };
}

export class ClassroomStore {
  /**
   * @param {string} file the state file
   * @param {{ title?: string, fresh?: boolean, now?: () => number }} options
   *   fresh: start a new class (a previous file is kept beside as .previous-<time>.json)
   */
  static open(file, { title = 'Cluster workshop', fresh = false, now = Date.now, limits = LIMITS } = {}) {
    const journal = `${file}.journal`;
    let state;
    let resumed = false;
    if (fresh) {
      const stamp = now();
      if (existsSync(file)) renameSync(file, file.replace(/(\.json)?$/, `.previous-${stamp}.json`));
      if (existsSync(journal)) renameSync(journal, file.replace(/(\.json)?$/, `.previous-${stamp}.json.journal`));
    } else if (existsSync(file)) {
      try {
        state = JSON.parse(readFileSync(file, 'utf8'));
        if (state?.version !== STATE_VERSION || typeof state.learners !== 'object' || !Array.isArray(state.history)) {
          throw new Error(`unknown state version ${state?.version}`);
        }
        state.seq ??= 0;
        resumed = true;
      } catch (err) {
        throw new StateFileError(
          `The classroom state file ${file} could not be read (${err.message}). Keep it for later and start a new class with --new, or choose another file with --state.`,
        );
      }
    }
    state ??= newState({ title, now: now() });
    const store = new ClassroomStore(file, state, { now, limits });
    if (resumed) store.replay(journal);
    store.resumed = resumed;
    return store;
  }

  constructor(file, state, { now = Date.now, limits = LIMITS } = {}) {
    this.file = file;
    this.limits = limits;
    this.state = state;
    this.now = now;
    this.listeners = new Set();
    this.journalFile = `${file}.journal`;
    this.pendingLines = [];
    this.journalLines = 0;
    this.snapshotWanted = true; // the first flush writes the state whole
    this.flushing = null;
    this.handle = null;
    this.warnings = [];
    this.byName = new Map(Object.values(state.learners).map((l) => [nameKey(l.name), l]));
  }

  get joinCode() {
    return this.state.joinCode;
  }

  get instructorToken() {
    return this.state.instructorToken;
  }

  get learnerCount() {
    return this.byName.size;
  }

  /** Calls fn(learnerIds) after every change. */
  onChange(fn) {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  changed(ids) {
    for (const fn of this.listeners) fn(ids);
  }

  /** { learner, key } or { error: 'taken' | 'full' }. */
  join(name) {
    if (this.byName.has(nameKey(name))) return { error: 'taken' };
    if (this.byName.size >= this.limits.maxLearners) return { error: 'full' };
    const key = randomBytes(16).toString('hex');
    const op = { op: 'join', seq: this.state.seq + 1, id: `l${this.state.nextLearner}`, name, keyHash: hash(key).toString('hex'), at: new Date(this.now()).toISOString() };
    const learner = this.applyJoin(op);
    this.log(op);
    this.changed([learner.id]);
    return { learner, key };
  }

  applyJoin(op) {
    this.state.seq = op.seq;
    this.state.nextLearner = Math.max(this.state.nextLearner, Number(op.id.slice(1)) + 1);
    const learner = { id: op.id, name: op.name, keyHash: op.keyHash, joinedAt: op.at, lastReportAt: null, lastProgressAt: op.at, lastLesson: null, lessons: {}, recentIds: [] };
    this.state.learners[op.id] = learner;
    this.byName.set(nameKey(op.name), learner);
    return learner;
  }

  /** The learner whose id and key these are, else null. */
  authenticate(id, key) {
    if (typeof id !== 'string' || typeof key !== 'string' || !Object.hasOwn(this.state.learners, id)) return null;
    const learner = this.state.learners[id];
    return timingSafeEqual(hash(key), Buffer.from(learner.keyHash, 'hex')) ? learner : null;
  }

  /** Applies validated reports in order; a report id seen before is skipped. */
  applyReports(learner, reports) {
    const op = { op: 'reports', seq: this.state.seq + 1, learner: learner.id, receivedAt: new Date(this.now()).toISOString(), reports };
    const result = this.applyReportsOp(op);
    if (result.accepted > 0) {
      this.log(op);
      this.changed([learner.id]);
    }
    return result;
  }

  applyReportsOp(op) {
    const learner = this.state.learners[op.learner];
    const { reports, receivedAt } = op;
    let accepted = 0;
    let duplicates = 0;
    for (const r of reports) {
      if (learner.recentIds.includes(r.id)) {
        duplicates += 1;
        continue;
      }
      learner.recentIds.push(r.id);
      if (learner.recentIds.length > this.limits.maxRememberedReportIds) learner.recentIds.shift();
      this.applyOne(learner, r, receivedAt);
      accepted += 1;
    }
    if (accepted > 0) this.state.seq = op.seq;
    return { accepted, duplicates };
  }

  applyOne(learner, r, receivedAt) {
    const lesson = (learner.lessons[r.lesson] ??= emptyLesson());
    lesson.reports += 1;
    lesson.attempts = Math.max(lesson.attempts + 1, r.attempt);
    // A queued report older than what is known changes totals, not "last".
    const isLatest = !lesson.lastAt || r.at >= lesson.lastAt;
    if (r.passed) {
      if (!lesson.passedAt || r.at < lesson.passedAt) {
        if (!lesson.passedAt && r.at > learner.lastProgressAt) learner.lastProgressAt = r.at;
        lesson.passedAt = r.at;
      }
    } else if (Object.hasOwn(lesson.fails, r.failedStep) || Object.keys(lesson.fails).length < this.limits.maxStepsPerLesson) {
      lesson.fails[r.failedStep] = (lesson.fails[r.failedStep] ?? 0) + 1;
    }
    if (isLatest) {
      lesson.lastPassed = r.passed;
      lesson.lastFailedStep = r.failedStep;
      lesson.lastAt = r.at;
      // Failures in a row at the same step: the "stuck" signal.
      if (r.passed) {
        lesson.streak = 0;
        lesson.streakStep = null;
      } else if (lesson.streakStep === r.failedStep) {
        lesson.streak += 1;
      } else {
        lesson.streak = 1;
        lesson.streakStep = r.failedStep;
      }
    }
    if (!learner.lastReportAt || r.at >= learner.lastReportAt) {
      learner.lastReportAt = r.at;
      learner.lastLesson = r.lesson;
    }
    this.state.history.push({ learner: learner.id, lesson: r.lesson, passed: r.passed, failedStep: r.failedStep, durationMs: r.durationMs, attempt: r.attempt, at: r.at, receivedAt });
    const over = this.state.history.length - this.limits.maxStoredAttempts;
    if (over > 0) this.state.history.splice(0, over);
  }

  /** What the dashboard shows of a learner: never the key. */
  row(id) {
    const l = this.state.learners[id];
    if (!l) return null;
    return { id: l.id, name: l.name, joinedAt: l.joinedAt, lastReportAt: l.lastReportAt, lastProgressAt: l.lastProgressAt, lastLesson: l.lastLesson, lessons: l.lessons };
  }

  rows() {
    return Object.keys(this.state.learners).map((id) => this.row(id));
  }

  /** The history with names, for the export. */
  history() {
    return this.state.history.map((h) => ({ name: this.state.learners[h.learner]?.name ?? '', ...h }));
  }

  /** Applies the journal's operations numbered after the snapshot; stops at a line cut short. */
  replay(journal) {
    if (!existsSync(journal)) return;
    const lines = readFileSync(journal, 'utf8').split('\n');
    for (const [i, line] of lines.entries()) {
      if (!line) continue;
      let op;
      try {
        op = JSON.parse(line);
      } catch {
        if (lines.slice(i + 1).some(Boolean)) this.warnings.push(`${journal}: line ${i + 1} could not be read; the operations after it were not replayed.`);
        break;
      }
      if (!(op.seq > this.state.seq)) continue;
      if (op.op === 'join') this.applyJoin(op);
      else if (op.op === 'reports' && this.state.learners[op.learner]) this.applyReportsOp(op);
    }
  }

  log(op) {
    this.pendingLines.push(`${JSON.stringify(op)}\n`);
    return this.save();
  }

  /**
   * Resolves once everything changed before the call is on disk. Writes never
   * overlap: operations logged while one is in flight go into the next.
   */
  save() {
    this.flushing ??= this.flushLoop();
    return this.flushing;
  }

  /** Writes the whole state and empties the journal (at start, every COMPACT_EVERY lines, at close). */
  snapshot() {
    this.snapshotWanted = true;
    return this.save();
  }

  async flushLoop() {
    await null; // so that `flushing` is set before the loop can clear it
    try {
      while (this.pendingLines.length || this.snapshotWanted) {
        if (!this.handle) {
          mkdirSync(dirname(this.file), { recursive: true });
          this.handle = await openFile(this.journalFile, 'a', 0o600);
        }
        if (this.pendingLines.length) {
          const lines = this.pendingLines;
          this.pendingLines = [];
          try {
            await this.handle.appendFile(lines.join(''));
          } catch (err) {
            this.pendingLines.unshift(...lines); // the next save tries again
            throw err;
          }
          this.journalLines += lines.length;
          if (this.journalLines >= COMPACT_EVERY) this.snapshotWanted = true;
        }
        if (this.snapshotWanted) {
          this.snapshotWanted = false;
          // The snapshot holds every operation applied so far (up to state.seq);
          // lines still pending hold numbers it covers and are skipped on replay.
          const tmp = `${this.file}.${process.pid}.tmp`;
          // Owner-only: it holds the instructor token and the join code.
          await writeFile(tmp, JSON.stringify(this.state), { mode: 0o600 });
          await rename(tmp, this.file);
          await this.handle.truncate(0);
          this.journalLines = 0;
        }
      }
    } finally {
      // Synchronously after the last check: a change made from now on starts a new flush.
      this.flushing = null;
    }
  }

  /** Writes the state whole and closes (and removes) the emptied journal. */
  async close() {
    let saved = true;
    await this.snapshot().catch(() => {
      saved = false;
    });
    await this.handle?.close();
    this.handle = null;
    if (saved) await unlink(this.journalFile).catch(() => {});
  }
}
