// The OS threads of the learner's process, from the process table (Linux:
// /proc/<pid>/task), not from what the program says about itself: how many
// there are now, and the most there were while a burst of requests ran.
import { threadsOf } from '../../lib/harness/processes.js';

// Node's own I/O pool (libuv, 4 threads unless UV_THREADPOOL_SIZE says
// otherwise) starts the first time something uses it (a file read, a DNS
// lookup), which may be in the middle of a run. Node 22 and later name those
// threads, so they are left out of every count; Node 20 does not, and starts
// the pool at boot for an ES module anyway.
const NODE_IO_POOL = 'libuv-worker';

/** The threads of pid that count (all but Node's I/O pool); null where they cannot be read. */
export function countedThreads(pid) {
  const threads = threadsOf(pid);
  return threads && threads.filter((t) => t.name !== NODE_IO_POOL);
}

/** How many threads of pid count now; null where they cannot be read. */
export function threadCount(pid) {
  return countedThreads(pid)?.length ?? null;
}

/** "node x7, WorkerThread x3": what the threads call themselves, for messages. */
export function describeThreads(threads) {
  const byName = new Map();
  for (const t of threads ?? []) byName.set(t.name || '?', (byName.get(t.name || '?') ?? 0) + 1);
  return [...byName].map(([name, n]) => `${name} x${n}`).join(', ');
}

/**
 * Samples the thread count of pid every intervalMs until stop() (or signal
 * aborts). A thread lives for at least a task's length (300 ms in the
 * bursts), so 10 ms samples cannot miss one.
 * @returns {{ supported: boolean, peak: number|null, peakThreads: object[]|null, samples: number, stop(): void }}
 */
export function sampleThreads(pid, { intervalMs = 10, signal } = {}) {
  const watch = { supported: threadCount(pid) !== null, peak: null, peakThreads: null, samples: 0 };
  const take = () => {
    const threads = countedThreads(pid);
    if (!threads) return;
    watch.samples += 1;
    if (watch.peak === null || threads.length > watch.peak) {
      watch.peak = threads.length;
      watch.peakThreads = threads;
    }
  };
  take();
  const timer = watch.supported ? setInterval(take, intervalMs) : null;
  watch.stop = () => {
    if (timer) clearInterval(timer);
    if (watch.supported) take();
  };
  signal?.addEventListener('abort', () => watch.stop(), { once: true });
  return watch;
}
