// The class's state: learners, their per-lesson totals and a bounded history
// of attempts. Every change is a numbered operation, appended to a journal
// (<state file>.journal, one JSON line each) and fsynced before the request
// that made it is answered; now and then, and at every start and stop, the
// whole state is written as a snapshot (lib/fs/atomic-write.js: temporary
// file, fsync, rename) and the journal emptied. A start loads the snapshot and
// replays the journal's operations numbered after it, so a restart, even
// after kill -9 or a power loss, loses no result it acknowledged.
//
// Opening reads and never writes: nothing on disk changes until start(),
// which the server calls once it is listening (a start that fails, for a port
// in use, leaves every file as it was). A journal line that cannot be read (a
// line cut short by a crash, the NUL bytes a power loss leaves, a damaged
// operation) is skipped, the replay goes on past it, and start() keeps it in
// <state file>.corrupt before the journal is emptied.
import { createHash, randomBytes, randomInt, timingSafeEqual } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, statSync } from 'node:fs';
import { open as openFile, rename, unlink } from 'node:fs/promises';
import { dirname } from 'node:path';
import { writeFileAtomic, syncFolder } from '../fs/atomic-write.js';
import { LIMITS } from './limits.js';
import { StateFileError } from './state-error.js';
import { stateProblem, operationProblem } from './state-check.js';

export { StateFileError };
export const STATE_VERSION = 1;
// Journal lines after which the state is written whole and the journal emptied.
const COMPACT_EVERY = 2000;
// No 0/O, 1/I/L: the code is read off a projector.
const CODE_ALPHABET = 'ABCDEFGHJKMNPQRSTUVWXYZ23456789';
const CODE_LENGTH = 6;

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
// Counts keyed by what a learner sent are kept in objects without a
// prototype: a key such as "constructor" is then a key like any other.
const dict = (entries = {}) => Object.assign(Object.create(null), entries);

function newState({ title, now }) {
  return {
    version: STATE_VERSION,
    title,
    createdAt: new Date(now).toISOString(),
    joinCode: newJoinCode(),
    instructorToken: randomBytes(16).toString('hex'),
    nextLearner: 1,
    seq: 0,
    learners: dict(),
    history: [],
  };
}

function emptyLesson() {
  return { attempts: 0, reports: 0, passedAt: null, lastPassed: null, lastFailedStep: null, lastAt: null, streak: 0, streakStep: null, furthestStep: -1, fails: dict() };
}

/** A state read from disk, with the prototype-free objects the store counts in. */
function normalize(state) {
  state.seq ??= 0;
  state.learners = dict(state.learners);
  for (const l of Object.values(state.learners)) {
    l.lessons = dict(l.lessons);
    for (const lesson of Object.values(l.lessons)) {
      lesson.fails = dict(lesson.fails);
      lesson.furthestStep ??= -1;
    }
  }
  return state;
}

export class ClassroomStore {
  /**
   * Reads the state file and replays its journal, in memory only.
   * @param {string} file the state file
   * @param {{ title?: string, fresh?: boolean, now?: () => number, limits?: object,
   *   steps?: Map<string, string[]> }} options
   *   fresh: start a new class even if the file holds one (start() keeps the old
   *   files beside it as .previous-<time>.json); steps: each lesson's step ids in
   *   the order they run (a failure at a later step counts as progress)
   */
  static open(file, { title = 'Cluster workshop', fresh = false, now = Date.now, limits = LIMITS, steps = new Map() } = {}) {
    const journal = `${file}.journal`;
    for (const f of [file, journal]) {
      if (existsSync(f) && !statSync(f).isFile()) {
        throw new StateFileError(`The classroom ${f === journal ? 'journal' : 'state file'} ${f} is not a file. Move it away, or choose another state file with --state.`);
      }
    }
    let state;
    let resumed = false;
    if (!fresh && existsSync(file)) {
      let problem;
      try {
        state = JSON.parse(readFileSync(file, 'utf8'));
        problem = stateProblem(state, STATE_VERSION);
      } catch (err) {
        problem = err.message;
      }
      if (problem) {
        throw new StateFileError(
          `The classroom state file ${file} could not be read: ${problem}. Nothing was changed. Keep it for later and start a new class with --new (it is kept beside as .previous-<time>.json), or choose another file with --state.`,
        );
      }
      normalize(state);
      resumed = true;
    }
    state ??= newState({ title, now: now() });
    const store = new ClassroomStore(file, state, { now, limits, steps });
    store.fresh = fresh;
    if (resumed) store.replay(journal);
    store.resumed = resumed;
    return store;
  }

  constructor(file, state, { now = Date.now, limits = LIMITS, steps = new Map() } = {}) {
    this.file = file;
    this.limits = limits;
    this.state = state;
    this.now = now;
    this.stepOrder = new Map([...steps].map(([lesson, ids]) => [lesson, new Map(ids.map((id, i) => [id, i]))]));
    this.listeners = new Set();
    this.journalFile = `${file}.journal`;
    this.corruptFile = `${file}.corrupt`;
    this.corruptLines = [];
    this.pendingLines = [];
    this.journalLines = 0;
    this.snapshotWanted = true; // the first flush writes the state whole
    this.flushing = null;
    this.handle = null;
    this.warnings = [];
    this.started = false;
    // Writes wait for start(): nothing on disk changes before the server listens.
    this.ready = new Promise((resolve) => (this.markReady = resolve));
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

  learner(id) {
    return typeof id === 'string' && Object.hasOwn(this.state.learners, id) ? this.state.learners[id] : null;
  }

  nextSeq() {
    return this.state.seq + 1;
  }

  /**
   * { learner, key, rejoined } or { error: 'taken' | 'full' }. A name already in
   * the class is taken, unless the instructor let that learner join again
   * (they lost their classroom.json): then the same learner gets a new key.
   */
  join(name) {
    const existing = this.byName.get(nameKey(name));
    const key = randomBytes(16).toString('hex');
    const at = new Date(this.now()).toISOString();
    if (existing) {
      if (!existing.rejoinAllowed) return { error: 'taken' };
      const op = { op: 'rekey', seq: this.nextSeq(), learner: existing.id, keyHash: hash(key).toString('hex'), at };
      this.applyOp(op);
      this.log(op);
      this.changed([existing.id]);
      return { learner: existing, key, rejoined: true };
    }
    if (this.byName.size >= this.limits.maxLearners) return { error: 'full' };
    const op = { op: 'join', seq: this.nextSeq(), id: `l${this.state.nextLearner}`, name, keyHash: hash(key).toString('hex'), at };
    const learner = this.applyOp(op);
    this.log(op);
    this.changed([learner.id]);
    return { learner, key, rejoined: false };
  }

  /** The instructor's changes to a learner: { ok } or { error: 'missing' | 'taken' }. */
  rename(id, name) {
    const learner = this.learner(id);
    if (!learner) return { error: 'missing' };
    const other = this.byName.get(nameKey(name));
    if (other && other !== learner) return { error: 'taken' };
    return this.instructorOp({ op: 'rename', learner: id, name });
  }

  remove(id) {
    if (!this.learner(id)) return { error: 'missing' };
    return this.instructorOp({ op: 'remove', learner: id });
  }

  allowRejoin(id) {
    if (!this.learner(id)) return { error: 'missing' };
    return this.instructorOp({ op: 'allow-rejoin', learner: id });
  }

  instructorOp(fields) {
    const op = { ...fields, seq: this.nextSeq() };
    this.applyOp(op);
    this.log(op);
    this.changed([fields.learner]);
    return { ok: true };
  }

  /** Applies one journal operation (live or replayed); returns what it made, if anything. */
  applyOp(op) {
    const learner = op.op === 'join' ? null : this.learner(op.learner);
    switch (op.op) {
      case 'join': {
        this.state.seq = op.seq;
        this.state.nextLearner = Math.max(this.state.nextLearner, Number(op.id.slice(1)) + 1);
        const l = { id: op.id, name: op.name, keyHash: op.keyHash, joinedAt: op.at, lastReportAt: null, lastProgressAt: op.at, lastLesson: null, lessons: dict(), recentIds: [] };
        this.state.learners[op.id] = l;
        this.byName.set(nameKey(op.name), l);
        return l;
      }
      case 'reports':
        return learner ? this.applyReportsOp(op) : { accepted: 0, duplicates: 0 };
      default:
        break;
    }
    this.state.seq = Math.max(this.state.seq, op.seq);
    if (!learner) return null; // removed since: nothing to apply
    if (op.op === 'rekey') {
      learner.keyHash = op.keyHash;
      learner.rejoinAllowed = false;
      learner.lastProgressAt = op.at;
    } else if (op.op === 'rename') {
      this.byName.delete(nameKey(learner.name));
      learner.name = op.name;
      this.byName.set(nameKey(op.name), learner);
    } else if (op.op === 'remove') {
      this.byName.delete(nameKey(learner.name));
      delete this.state.learners[learner.id];
    } else if (op.op === 'allow-rejoin') {
      learner.rejoinAllowed = true;
    }
    return learner;
  }

  /** The learner whose id and key these are, else null. */
  authenticate(id, key) {
    const learner = this.learner(id);
    if (!learner || typeof key !== 'string') return null;
    return timingSafeEqual(hash(key), Buffer.from(learner.keyHash, 'hex')) ? learner : null;
  }

  /** Applies validated reports in order, stamped with the server's time; a report id seen before is skipped. */
  applyReports(learner, reports) {
    const op = { op: 'reports', seq: this.nextSeq(), learner: learner.id, receivedAt: new Date(this.now()).toISOString(), reports };
    const result = this.applyReportsOp(op);
    if (result.accepted > 0) {
      result.saved = this.log(op);
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

  /**
   * The server's clock decides: a report counts when it arrives (a batch in
   * the order it was sent); the learner's own time is kept as sentAt, for
   * information only.
   */
  applyOne(learner, r, receivedAt) {
    const lesson = (learner.lessons[r.lesson] ??= emptyLesson());
    lesson.reports += 1;
    lesson.attempts = Math.max(lesson.attempts + 1, r.attempt);
    if (r.passed) {
      if (!lesson.passedAt) {
        lesson.passedAt = receivedAt;
        learner.lastProgressAt = receivedAt;
      }
      lesson.streak = 0;
      lesson.streakStep = null;
    } else {
      if (Object.hasOwn(lesson.fails, r.failedStep) || Object.keys(lesson.fails).length < this.limits.maxStepsPerLesson) {
        lesson.fails[r.failedStep] = (lesson.fails[r.failedStep] ?? 0) + 1;
      }
      // Progress is a verify that gets further than any before it in the lesson.
      const position = this.stepOrder.get(r.lesson)?.get(r.failedStep) ?? -1;
      if (position > lesson.furthestStep) {
        lesson.furthestStep = position;
        if (!lesson.passedAt) learner.lastProgressAt = receivedAt;
      }
      // Failures in a row at the same step: the "stuck" signal.
      if (lesson.streakStep === r.failedStep) lesson.streak += 1;
      else {
        lesson.streak = 1;
        lesson.streakStep = r.failedStep;
      }
    }
    lesson.lastPassed = r.passed;
    lesson.lastFailedStep = r.failedStep;
    lesson.lastAt = receivedAt;
    learner.lastReportAt = receivedAt;
    learner.lastLesson = r.lesson;
    const sentAt = r.sentAt ?? r.at ?? null;
    this.state.history.push({ learner: learner.id, lesson: r.lesson, passed: r.passed, failedStep: r.failedStep, durationMs: r.durationMs, attempt: r.attempt, at: receivedAt, receivedAt, sentAt });
    const over = this.state.history.length - this.limits.maxStoredAttempts;
    if (over > 0) this.state.history.splice(0, over);
  }

  /** What the dashboard shows of a learner: never the key. */
  row(id) {
    const l = this.learner(id);
    if (!l) return null;
    return { id: l.id, name: l.name, joinedAt: l.joinedAt, lastReportAt: l.lastReportAt, lastProgressAt: l.lastProgressAt, lastLesson: l.lastLesson, rejoinAllowed: Boolean(l.rejoinAllowed), lessons: l.lessons };
  }

  rows() {
    return Object.keys(this.state.learners).map((id) => this.row(id));
  }

  /** The history with names, for the export. */
  history() {
    return this.state.history.map((h) => ({ name: this.state.learners[h.learner]?.name ?? '', ...h }));
  }

  /**
   * Applies the journal's operations numbered after the snapshot. A line that
   * cannot be read or is not a well-formed operation is set aside (start()
   * keeps it in the .corrupt file) and the replay goes on past it.
   */
  replay(journal) {
    if (!existsSync(journal)) return;
    const text = readFileSync(journal, 'latin1');
    // Runs of NUL bytes (what a power loss leaves where data never reached
    // the disk) separate lines like a newline does.
    const pieces = text.split(/\n|(\0+)/).filter((p) => p !== undefined && p !== '');
    for (const raw of pieces) {
      if (raw.startsWith('\0')) {
        this.corruptLines.push(raw);
        continue;
      }
      const line = Buffer.from(raw, 'latin1').toString('utf8');
      let op;
      try {
        op = JSON.parse(line);
      } catch {
        op = undefined;
      }
      if (op === undefined || operationProblem(op)) {
        this.corruptLines.push(line);
        continue;
      }
      if (!(op.seq > this.state.seq)) continue;
      if (op.op === 'join' && this.byName.has(nameKey(op.name))) {
        this.corruptLines.push(line);
        continue;
      }
      this.applyOp(op);
    }
    if (this.corruptLines.length) {
      const n = this.corruptLines.length;
      this.warnings.push(`${n} unreadable line${n === 1 ? '' : 's'} of ${journal} skipped (the operations around them were replayed); kept in ${this.corruptFile}.`);
    }
  }

  /**
   * Once the server listens: keeps the previous class's files (--new), sets
   * aside the journal's unreadable lines, writes the state whole and empties
   * the journal. Writes made before this wait for it.
   */
  async start() {
    if (this.fresh) {
      const stamp = this.now();
      const previous = this.file.replace(/(\.json)?$/, `.previous-${stamp}.json`);
      if (existsSync(this.file)) await rename(this.file, previous);
      if (existsSync(this.journalFile)) await rename(this.journalFile, `${previous}.journal`);
    }
    if (this.corruptLines.length) {
      const before = existsSync(this.corruptFile) ? readFileSync(this.corruptFile) : Buffer.alloc(0);
      const added = Buffer.from(this.corruptLines.map((l) => `${l}\n`).join(''), 'latin1');
      await writeFileAtomic(this.corruptFile, Buffer.concat([before, added]), { mode: 0o600 });
      this.corruptLines = [];
    }
    this.started = true;
    this.markReady();
    await this.snapshot();
  }

  log(op) {
    this.pendingLines.push(`${JSON.stringify(op)}\n`);
    return this.save();
  }

  /**
   * Resolves once everything changed before the call is on disk (fsynced).
   * Writes never overlap: operations logged while one is in flight go into the next.
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
    await this.ready;
    try {
      while (this.pendingLines.length || this.snapshotWanted) {
        if (!this.handle) {
          mkdirSync(dirname(this.file), { recursive: true });
          this.handle = await openFile(this.journalFile, 'a', 0o600);
          syncFolder(dirname(this.journalFile)); // the journal's own name survives a power loss
        }
        if (this.pendingLines.length) {
          const lines = this.pendingLines;
          this.pendingLines = [];
          try {
            await this.handle.appendFile(lines.join(''));
            // On the disk, not in the page cache, before anything is acknowledged.
            await this.handle.datasync();
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
          // Owner-only: it holds the instructor token and the join code.
          await writeFileAtomic(this.file, JSON.stringify(this.state), { mode: 0o600 });
          await this.handle.truncate(0);
          await this.handle.datasync();
          this.journalLines = 0;
        }
      }
    } finally {
      // Synchronously after the last check: a change made from now on starts a new flush.
      this.flushing = null;
    }
  }

  /** Writes the state whole and closes (and removes) the emptied journal; writes nothing if never started. */
  async close() {
    if (!this.started) return;
    let saved = true;
    await this.snapshot().catch(() => {
      saved = false;
    });
    await this.handle?.close();
    this.handle = null;
    if (saved) await unlink(this.journalFile).catch(() => {});
  }
}
