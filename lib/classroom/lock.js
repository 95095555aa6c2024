// One state file has one owner. Two classrooms on one state file would both
// hand out learner ids l1, l2... and the last to write would erase the other's
// learners; a start that failed used to rewrite the state and delete the
// journal a running classroom was still acknowledging into. So before a
// classroom reads its state file it takes <state file>.lock, created
// exclusively, holding its pid and (once listening) its port, so that the
// refusal can say who holds it. A lock whose pid is no longer running (a
// classroom killed with kill -9, a machine restarted) is taken over.
import { closeSync, fsyncSync, openSync, readFileSync, rmSync, statSync, writeSync } from 'node:fs';
import { writeFileAtomicSync } from '../fs/atomic-write.js';
import { StateFileError } from './state-error.js';

// A lock file that exists but is still empty may be one being written right now.
const EMPTY_LOCK_GRACE_MS = 5000;

export class StateFileLockedError extends StateFileError {
  constructor(message, holder) {
    super(message);
    this.name = 'StateFileLockedError';
    this.holder = holder;
  }
}

function running(pid) {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM'; // alive, owned by someone else
  }
}

function readHolder(lockFile) {
  try {
    const holder = JSON.parse(readFileSync(lockFile, 'utf8'));
    return Number.isInteger(holder?.pid) && holder.pid > 0 ? holder : null;
  } catch {
    return null;
  }
}

function youngerThan(file, ms) {
  try {
    return Date.now() - statSync(file).mtimeMs < ms;
  } catch {
    return false;
  }
}

function describe(stateFile, lockFile, holder) {
  const where = holder?.port ? `pid ${holder.pid}, port ${holder.port}` : holder ? `pid ${holder.pid}, still starting` : 'a classroom that is starting';
  return (
    `The classroom state file ${stateFile} is in use by another classroom (${where}). ` +
    'Use that classroom (its dashboard is still live), or stop it first (Ctrl-C in its terminal); ' +
    `to run a second class at the same time, give it its own file with --state <file>. ` +
    `If no classroom is running, delete ${lockFile}.`
  );
}

/**
 * Takes the lock of `stateFile` or throws StateFileLockedError naming the holder.
 * @returns {{ file: string, update(info: { port: number, host: string }): void, release(): void }}
 */
export function lockStateFile(stateFile) {
  const lockFile = `${stateFile}.lock`;
  const mine = { pid: process.pid, port: null, host: null, since: new Date().toISOString() };
  for (let tries = 0; ; tries++) {
    let fd;
    try {
      fd = openSync(lockFile, 'wx', 0o600);
    } catch (err) {
      if (err.code === 'ENOENT') throw new StateFileError(`The folder of the classroom state file ${stateFile} does not exist. Create it, or choose another file with --state.`);
      if (err.code !== 'EEXIST') throw err;
      const holder = readHolder(lockFile);
      const held = holder ? running(holder.pid) : youngerThan(lockFile, EMPTY_LOCK_GRACE_MS);
      if (held || tries >= 2) throw new StateFileLockedError(describe(stateFile, lockFile, holder), holder);
      // The holder is gone: take its lock over.
      rmSync(lockFile, { force: true });
      continue;
    }
    try {
      writeSync(fd, JSON.stringify(mine));
      fsyncSync(fd);
    } finally {
      closeSync(fd);
    }
    break;
  }
  let held = true;
  return {
    file: lockFile,
    /** Says where this classroom listens, for the refusal a second one gets. */
    update(info) {
      if (!held) return;
      Object.assign(mine, info);
      writeFileAtomicSync(lockFile, JSON.stringify(mine), { mode: 0o600 });
    },
    /** Removes the lock, if it is still this process's. */
    release() {
      if (!held) return;
      held = false;
      if (readHolder(lockFile)?.pid === process.pid) rmSync(lockFile, { force: true });
    },
  };
}
