// The process table, read from the operating system rather than from the
// learner's logs: which processes a program started, which of them are
// cluster workers, and which carry a run's marker.
import { readFileSync, readdirSync } from 'node:fs';
import { execFileSync } from 'node:child_process';

const HAS_PROC = process.platform === 'linux';

// Environment variable every process of one verifier run inherits, so that a
// process which left the group (a detached grandchild) is still found.
export const RUN_MARKER = 'CLUSTER_WORKSHOP_RUN';

function parseStat(pid) {
  let text;
  try {
    text = readFileSync(`/proc/${pid}/stat`, 'utf8');
  } catch {
    return null;
  }
  // comm is in parentheses and may itself contain spaces or parentheses.
  const close = text.lastIndexOf(')');
  const comm = text.slice(text.indexOf('(') + 1, close);
  const fields = text.slice(close + 2).split(' ');
  return {
    pid,
    comm,
    state: fields[0],
    ppid: Number(fields[1]),
    pgid: Number(fields[2]),
  };
}

function listFromProc() {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    const stat = parseStat(Number(name));
    if (stat) out.push(stat);
  }
  return out;
}

function listFromPs() {
  const text = execFileSync('ps', ['-A', '-o', 'pid=,ppid=,pgid=,stat=,comm='], { encoding: 'utf8' });
  return text
    .split('\n')
    .map((line) => line.trim().split(/\s+/))
    .filter((f) => f.length >= 5)
    .map(([pid, ppid, pgid, state, ...comm]) => ({
      pid: Number(pid),
      ppid: Number(ppid),
      pgid: Number(pgid),
      state: state[0],
      comm: comm.join(' '),
    }));
}

/** Every live (not zombie) process: { pid, ppid, pgid, state, comm }. */
export function listProcesses() {
  const all = HAS_PROC ? listFromProc() : listFromPs();
  return all.filter((p) => p.state !== 'Z' && p.state !== 'X');
}

/** The environment a process was started with, or null when it cannot be read. */
export function readEnvironment(pid) {
  if (!HAS_PROC) return null;
  try {
    const raw = readFileSync(`/proc/${pid}/environ`, 'utf8');
    const env = {};
    for (const entry of raw.split('\0')) {
      const eq = entry.indexOf('=');
      if (eq > 0) env[entry.slice(0, eq)] = entry.slice(eq + 1);
    }
    return env;
  } catch {
    return null;
  }
}

export function isAlive(pid) {
  if (HAS_PROC) {
    const stat = parseStat(pid);
    return stat !== null && stat.state !== 'Z' && stat.state !== 'X';
  }
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/**
 * Whether pid is gone for good: its parent has collected its exit status. A
 * dead process stays a zombie until then, and a cluster primary only stops
 * handing connections to a dead worker once it has reaped it.
 */
export function isReaped(pid) {
  if (HAS_PROC) return parseStat(pid) === null;
  try {
    process.kill(pid, 0);
    return false;
  } catch (err) {
    return err.code !== 'EPERM';
  }
}

/** Every live descendant of pid (children, grandchildren, ...). */
export function descendantsOf(pid, procs = listProcesses()) {
  const byParent = new Map();
  for (const p of procs) {
    if (!byParent.has(p.ppid)) byParent.set(p.ppid, []);
    byParent.get(p.ppid).push(p);
  }
  const out = [];
  const queue = [pid];
  while (queue.length) {
    for (const child of byParent.get(queue.shift()) ?? []) {
      out.push(child);
      queue.push(child.pid);
    }
  }
  return out;
}

/**
 * The cluster workers of a primary: its live children that cluster.fork()
 * started. cluster.fork() sets NODE_UNIQUE_ID in the worker's environment,
 * which tells a worker from any other child (a helper the primary spawned).
 */
export function workerPidsOf(primaryPid, procs = listProcesses()) {
  const children = procs.filter((p) => p.ppid === primaryPid);
  if (!HAS_PROC) return children.map((p) => p.pid).sort((a, b) => a - b);
  return children
    .filter((p) => {
      const env = readEnvironment(p.pid);
      // An unreadable environment means the process is already gone.
      return env !== null && env.NODE_UNIQUE_ID !== undefined;
    })
    .map((p) => p.pid)
    .sort((a, b) => a - b);
}

/**
 * Live processes whose environment carries RUN_MARKER, optionally with a
 * given value; or whose command line does (`RUN_MARKER=<value>` in an
 * argument: a helper such as nginx overwrites its environment, see helper.js).
 */
export function markedProcesses(value) {
  if (!HAS_PROC) return [];
  const out = [];
  for (const p of listProcesses()) {
    if (p.pid === process.pid) continue;
    const env = readEnvironment(p.pid);
    const mark = env?.[RUN_MARKER] ?? markInCommandLine(p.pid);
    if (mark === undefined) continue;
    if (value === undefined || mark === value) out.push({ ...p, mark });
  }
  return out;
}

const MARK_IN_ARGS = new RegExp(`${RUN_MARKER}=([\\w:-]+)`);

function markInCommandLine(pid) {
  try {
    return MARK_IN_ARGS.exec(readFileSync(`/proc/${pid}/cmdline`, 'utf8'))?.[1];
  } catch {
    return undefined;
  }
}

/**
 * The OS threads of a process (Linux: /proc/<pid>/task), each with the name
 * the thread gave itself (comm); null where there is no /proc (macOS) or the
 * process is gone.
 */
export function threadsOf(pid) {
  if (!HAS_PROC) return null;
  try {
    return readdirSync(`/proc/${pid}/task`).map((tid) => {
      let name = '';
      try {
        name = readFileSync(`/proc/${pid}/task/${tid}/comm`, 'utf8').trim();
      } catch {
        // the thread ended between the listing and the read
      }
      return { tid: Number(tid), name };
    });
  } catch {
    return null;
  }
}

/**
 * CPU seconds (user + system) a process has used so far, or 0 when it cannot
 * be read: tells a program stuck in a synchronous loop from one that waits.
 */
export function cpuSeconds(pid) {
  if (!HAS_PROC) return 0;
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    // utime and stime (fields 14 and 15 of stat(5)) in clock ticks, 100 per second on Linux.
    return (Number(fields[11]) + Number(fields[12])) / 100;
  } catch {
    return 0;
  }
}

/**
 * The pid a process has inside its innermost PID namespace (what its own
 * process.pid says: 1 for the init of a container), from /proc/<pid>/status;
 * the pid itself outside a namespace, undefined when it cannot be read.
 */
export function namespacePidOf(pid) {
  if (!HAS_PROC) return pid;
  try {
    const line = readFileSync(`/proc/${pid}/status`, 'utf8').match(/^NSpid:\s*(.+)$/m)?.[1];
    return line ? Number(line.trim().split(/\s+/).at(-1)) : pid;
  } catch {
    return undefined;
  }
}

export function trySignal(pid, signal) {
  try {
    process.kill(pid, signal);
    return true;
  } catch {
    return false;
  }
}
