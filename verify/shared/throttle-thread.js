// The watcher of shared/throttle.js, in a thread of its own. It must see a
// new worker within its first milliseconds, before the worker has said
// 'online' and asked the primary for the server. On the verifier's main
// thread it could not: that thread also runs the load and the keep-alive
// clients, and on a loaded 2-core machine its timers fire late by 100 ms
// and more, by which time a replacement of a small program already listens
// (stress: all 3 replacements of a round seen too late, the hold missed,
// and a program that retires before it forks passed the capacity step).
// Here nothing else runs: the loop sleeps with Atomics.wait, never waits
// for an event loop, and only posts what it saw.
import { readFileSync, readdirSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';

const { primaryPid, initial, control, holdMs, scanMs, runMs, onlineBytes, queryServerBytes, watchMs } = workerData;
const stopFlag = new Int32Array(control); // [0]: 1 once the main thread says stop

// Epoch milliseconds: the main thread's performance.now() has another origin.
const now = () => performance.timeOrigin + performance.now();
const signal = (pid, sig) => {
  try {
    process.kill(pid, sig);
    return true;
  } catch {
    return false;
  }
};
const alive = (pid) => signal(pid, 0);

// The primary's children, from one small file (Linux 3.5+): cheap enough to
// read every few ms. Without it, a scan of /proc for the primary's children.
function childrenOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return scanForChildren(pid);
  }
}
function scanForChildren(pid) {
  const found = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      const stat = readFileSync(`/proc/${name}/stat`, 'utf8');
      if (Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === pid) found.push(Number(name));
    } catch {}
  }
  return found;
}

function bytesWritten(pid) {
  try {
    return Number(/wchar:\s*(\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? 0);
  } catch {
    return null;
  }
}

const known = new Set(initial);
const watched = new Map(); // pid -> firstSeen: stopped, run in short steps until it says 'online'
const holding = new Map(); // pid -> when its hold ends

const letGo = (pid) => {
  signal(pid, 'SIGCONT');
  watched.delete(pid);
};

while (Atomics.load(stopFlag, 0) === 0) {
  for (const pid of childrenOf(primaryPid)) {
    if (known.has(pid)) continue;
    known.add(pid);
    if (!signal(pid, 'SIGSTOP')) continue;
    const firstSeen = now();
    watched.set(pid, firstSeen);
    parentPort.postMessage({ pid, firstSeen });
  }
  // Each watched worker, stopped: what has it written so far?
  for (const [pid, firstSeen] of watched) {
    const written = bytesWritten(pid);
    if (written === null || !alive(pid) || now() - firstSeen > watchMs) {
      letGo(pid);
    } else if (written >= queryServerBytes) {
      // Seen past 'online', already asking for the server: pausing it now
      // would make a dip the program could not avoid.
      letGo(pid);
      parentPort.postMessage({ pid, missed: true });
    } else if (written >= onlineBytes) {
      watched.delete(pid); // stays stopped: the hold
      const heldAt = now();
      holding.set(pid, heldAt + holdMs);
      parentPort.postMessage({ pid, heldAt });
    }
  }
  for (const [pid, until] of holding) {
    if (now() < until) continue;
    signal(pid, 'SIGCONT');
    holding.delete(pid);
    parentPort.postMessage({ pid, releasedAt: now() });
  }
  if (watched.size) {
    // One step: the watched workers run runMs, then are stopped and looked at again.
    for (const pid of watched.keys()) signal(pid, 'SIGCONT');
    Atomics.wait(stopFlag, 0, 0, runMs);
    for (const pid of watched.keys()) signal(pid, 'SIGSTOP');
  } else {
    Atomics.wait(stopFlag, 0, 0, scanMs);
  }
}
// Never leave a learner's process stopped.
for (const pid of [...watched.keys(), ...holding.keys()]) signal(pid, 'SIGCONT');
parentPort.postMessage({ done: true });
