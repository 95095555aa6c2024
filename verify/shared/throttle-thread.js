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
import { readFileSync } from 'node:fs';
import { parentPort, workerData } from 'node:worker_threads';
import { isAlive, trySignal, workerPidsOf } from '../../lib/harness/processes.js';

const { primaryPid, initial, control, holdMs, scanMs, runMs, onlineBytes, listeningBytes, watchMs } = workerData;
const stopFlag = new Int32Array(control); // [0]: 1 once the main thread says stop

// Epoch milliseconds: the main thread's performance.now() has another origin.
const now = () => performance.timeOrigin + performance.now();

// The primary's children, from one small file (Linux 3.5+): cheap enough to
// read every few ms. Without it, the harness's scan of the process table.
function childrenOf(pid) {
  try {
    return readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim().split(/\s+/).filter(Boolean).map(Number);
  } catch {
    return workerPidsOf(pid);
  }
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
  trySignal(pid, 'SIGCONT');
  watched.delete(pid);
};

let first = true;
while (Atomics.load(stopFlag, 0) === 0) {
  for (const pid of childrenOf(primaryPid)) {
    if (known.has(pid)) continue;
    known.add(pid);
    if (!trySignal(pid, 'SIGSTOP')) continue;
    const firstSeen = now();
    parentPort.postMessage({ pid, firstSeen });
    // Seen for the first time: it ran unwatched until now, the primary too.
    const written = bytesWritten(pid);
    if (written !== null && written >= listeningBytes) {
      // It may have said 'listening' already: pausing it now could make a
      // dip in a program that did everything right.
      trySignal(pid, 'SIGCONT');
      parentPort.postMessage({ pid, missed: true });
    } else if (written !== null && written >= onlineBytes) {
      const heldAt = now();
      holding.set(pid, heldAt + holdMs);
      parentPort.postMessage({ pid, heldAt });
    } else {
      watched.set(pid, firstSeen);
    }
  }
  if (first) {
    // Watching from now on: the caller sends its signal only after this.
    parentPort.postMessage({ ready: true });
    first = false;
  }
  // Each watched worker, stopped: what has it written so far?
  for (const [pid, firstSeen] of watched) {
    const written = bytesWritten(pid);
    if (written === null || !isAlive(pid) || now() - firstSeen > watchMs) {
      letGo(pid);
    } else if (written >= onlineBytes) {
      // It said 'online' in its last step, while the primary was paused, so
      // the primary has not answered a request for the server yet and the
      // worker cannot have said 'listening': hold it now.
      watched.delete(pid); // stays stopped: the hold
      const heldAt = now();
      holding.set(pid, heldAt + holdMs);
      parentPort.postMessage({ pid, heldAt });
    }
  }
  for (const [pid, until] of holding) {
    if (now() < until) continue;
    trySignal(pid, 'SIGCONT');
    holding.delete(pid);
    parentPort.postMessage({ pid, releasedAt: now() });
  }
  if (watched.size) {
    // One step: the watched workers run runMs while the primary is paused,
    // then the primary runs runMs while they are stopped. Under load this
    // thread may wake 20 ms late, and in that time a small program can say
    // 'online', ask for the server, get the answer and say 'listening'
    // (seen in stress): with the primary paused it cannot get the answer,
    // so each step ends short of 'listening' however long it lasts.
    trySignal(primaryPid, 'SIGSTOP');
    for (const pid of watched.keys()) trySignal(pid, 'SIGCONT');
    Atomics.wait(stopFlag, 0, 0, runMs);
    for (const pid of watched.keys()) trySignal(pid, 'SIGSTOP');
    trySignal(primaryPid, 'SIGCONT');
    Atomics.wait(stopFlag, 0, 0, runMs);
  } else {
    Atomics.wait(stopFlag, 0, 0, scanMs);
  }
}
// Never leave a learner's process stopped.
for (const pid of [primaryPid, ...watched.keys(), ...holding.keys()]) trySignal(pid, 'SIGCONT');
parentPort.postMessage({ done: true });
