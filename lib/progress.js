// The learner's progress: a small versioned JSON file inside the workspace
// folder, so it is visible and moves with the folder. Written atomically
// (lib/fs/atomic-write.js). A corrupt file is set aside with a
// warning, never a crash; a file from a newer cluster-workshop is left as it is.
import { existsSync, mkdirSync, readFileSync, renameSync } from 'node:fs';
import { writeFileAtomicSync } from './fs/atomic-write.js';
import { moveLegacyLessonFolders } from './workspace.js';
import { dirname, join, resolve } from 'node:path';

export const STATE_VERSION = 1;
export const STATE_FILE = 'progress.json';
export const WORKSPACE_NAME = 'cluster-workshop';

/**
 * The workspace folder: --dir, else $CLUSTER_WORKSHOP_DIR, else the workspace
 * the current folder is inside (a learner who went into
 * cluster-workshop/bottleneck to run `node server.js` is still in it), else
 * ./cluster-workshop.
 */
export function workspaceDir(dir, env = process.env, cwd = process.cwd()) {
  const given = dir ?? env.CLUSTER_WORKSHOP_DIR;
  if (given) return resolve(cwd, given);
  const here = resolve(cwd);
  for (let d = here; ; d = dirname(d)) {
    if (isWorkspace(d)) return d;
    if (dirname(d) === d) break;
  }
  return join(here, WORKSPACE_NAME);
}

/** A folder holding a progress file of ours (not any progress.json). */
function isWorkspace(d) {
  const file = join(d, STATE_FILE);
  if (!existsSync(file)) return false;
  try {
    const state = JSON.parse(readFileSync(file, 'utf8'));
    return Number.isInteger(state?.version) && typeof state.lessons === 'object';
  } catch {
    // An unreadable progress file beside our workspace package.json is still ours.
    return existsSync(join(d, 'package.json')) && readFileSync(join(d, 'package.json'), 'utf8').includes('cluster-workshop-workspace');
  }
}

function emptyState() {
  return { version: STATE_VERSION, current: null, lessons: {}, measurements: {} };
}

export class Progress {
  constructor(dir, state, { persistent = true, warnings = [] } = {}) {
    this.dir = dir;
    this.state = state;
    this.persistent = persistent;
    this.warnings = warnings;
  }

  get file() {
    return join(this.dir, STATE_FILE);
  }

  /**
   * Loads the progress of a workspace. With create: false and no workspace
   * folder, progress lives in memory only (a self-check outside a workspace
   * leaves no files behind).
   */
  static load(dir, { create = false } = {}) {
    const file = join(dir, STATE_FILE);
    const warnings = [];
    if (!existsSync(dir) && !create) return new Progress(dir, emptyState(), { persistent: false });
    let state = emptyState();
    if (existsSync(dir)) warnings.push(...moveLegacyLessonFolders(dir));
    if (existsSync(file)) {
      let parsed;
      try {
        parsed = JSON.parse(readFileSync(file, 'utf8'));
      } catch (err) {
        parsed = err;
      }
      if (Number.isInteger(parsed?.version) && parsed.version > STATE_VERSION) {
        // Written by a newer cluster-workshop: never destroy it, never overwrite it.
        warnings.push(
          `${file} was written by a newer cluster-workshop (state version ${parsed.version}). Update with: npx cluster-workshop@latest. Your progress is not changed this time.`,
        );
        return new Progress(dir, state, { persistent: false, warnings });
      }
      const problem =
        parsed instanceof Error
          ? parsed.message
          : !parsed || typeof parsed !== 'object' || parsed.version !== STATE_VERSION
            ? `unknown state version ${parsed?.version}`
            : typeof parsed.lessons !== 'object' || parsed.lessons === null || Array.isArray(parsed.lessons)
              ? 'no lessons in it'
              : null;
      if (!problem) {
        state = { ...emptyState(), ...parsed };
      } else {
        const aside = `${file}.corrupt-${Date.now()}`;
        try {
          renameSync(file, aside);
          warnings.push(`Your progress file could not be read (${problem}); it was moved to ${aside} and progress starts afresh.`);
        } catch {
          warnings.push(`Your progress file could not be read (${problem}); progress is kept in memory only this time.`);
          return new Progress(dir, state, { persistent: false, warnings });
        }
      }
    }
    return new Progress(dir, state, { warnings });
  }

  save() {
    if (!this.persistent) return false;
    try {
      mkdirSync(this.dir, { recursive: true });
      writeFileAtomicSync(this.file, `${JSON.stringify(this.state, null, 2)}\n`);
      return true;
    } catch (err) {
      this.warnings.push(`Could not save progress in ${this.dir} (${err.code ?? err.message}); it is kept in memory only.`);
      this.persistent = false;
      return false;
    }
  }

  lesson(id) {
    return this.state.lessons[id] ?? { status: 'not started', attempts: 0 };
  }

  /** 'done', 'current', 'started' or 'not started'. */
  statusOf(id) {
    const l = this.state.lessons[id];
    if (l?.status === 'done') return 'done';
    if (this.state.current === id) return 'current';
    return l?.status ?? 'not started';
  }

  isDone(id) {
    return this.state.lessons[id]?.status === 'done';
  }

  get current() {
    return this.state.current;
  }

  setCurrent(id) {
    this.state.current = id;
  }

  /** The learner began a lesson (its starter is in the workspace). */
  markStarted(id) {
    const prev = this.lesson(id);
    this.state.lessons[id] = {
      ...prev,
      status: prev.status === 'done' ? 'done' : 'started',
      attempts: prev.attempts ?? 0,
      startedAt: prev.startedAt ?? new Date().toISOString(),
    };
    this.state.current = id;
  }

  recordVerify(id, report) {
    const prev = this.lesson(id);
    const failed = report.steps.find((s) => !s.passed);
    this.state.lessons[id] = {
      ...prev,
      status: report.passed || prev.status === 'done' ? 'done' : 'started',
      attempts: (prev.attempts ?? 0) + 1,
      lastVerify: { passed: report.passed, failedStep: failed?.id ?? null, at: new Date().toISOString() },
      ...(report.passed && !prev.passedAt && { passedAt: new Date().toISOString() }),
    };
  }

  /** The step the last verify of a lesson failed at, or null. */
  lastFailedStep(id) {
    const last = this.state.lessons[id]?.lastVerify;
    return last && !last.passed ? last.failedStep : null;
  }

  /** Hint texts already shown for a lesson (texts, so a reordered manifest keeps them). */
  hintsShown(id) {
    return this.state.lessons[id]?.hintsShown ?? [];
  }

  recordHint(id, text) {
    const prev = this.lesson(id);
    this.state.lessons[id] = { ...prev, hintsShown: [...(prev.hintsShown ?? []), text] };
  }

  clearHints(id) {
    if (this.state.lessons[id]) this.state.lessons[id] = { ...this.state.lessons[id], hintsShown: [] };
  }

  recordSolutionSeen(id) {
    const prev = this.lesson(id);
    this.state.lessons[id] = { ...prev, solutionSeenAt: prev.solutionSeenAt ?? new Date().toISOString() };
  }

  /** Starts a lesson over: not done, no attempts, no hints seen; it becomes the current one. */
  resetLesson(id) {
    this.state.lessons[id] = { status: 'started', attempts: 0, startedAt: new Date().toISOString() };
    this.state.current = id;
  }

  /** Starts the whole course over, measurements included. */
  resetAll() {
    this.state = emptyState();
  }

  /** A store of figures kept between lessons, for the verifier's ctx.store. */
  measurements() {
    return {
      get: (k) => this.state.measurements[k],
      set: (k, v) => {
        this.state.measurements[k] = v;
      },
    };
  }
}
