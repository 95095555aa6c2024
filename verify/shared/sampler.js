// Watches the worker count of the running program every few milliseconds, so
// a step can say "at every moment at least N workers were alive" and name
// the moment it dipped, or "no new worker was forked during shutdown".
//
// A full process-table scan (ctx.workers()) costs a few ms on a busy machine,
// too much to repeat every 10 ms on 2 shared cores. So each tick only checks
// that the workers already known are still alive (one small /proc read each),
// and a full scan runs every few ticks to discover new workers, and at once
// whenever the cheap check sees fewer than `min` alive: a dip is only recorded
// when the full table confirms it, never because a new worker was not yet seen.
//
// With `serving`, a worker counts only once it can serve: the workers found at
// the start count at once, a new one from its first answer (to the step's
// load, or to probes sent during a dip while it has not answered yet). A forked worker that
// still loads its modules is a process, not capacity. An answer arrives a
// little after the worker could take it, later still when the machine is busy,
// so a gap between an old worker's exit and its replacement's first answer is
// no finding by itself. What tells a real dip from that delay is its share of
// the replacement's start-up (fork to first answer): a replacement forked
// after its old worker was stopped spends (nearly) all of its start-up inside
// the dip; one that was listening before spends (nearly) none of it there.
// lowest() counts dips of at least `toleranceMs` and `minShare` of that start-up.
//
// Timing alone misleads when the verifier itself is starved for a few hundred
// ms (2 shared cores): it then sees an old worker gone and its replacement
// not yet answering, though the replacement had listened first. So with
// `minMisses`, a dip also needs evidence from the cluster's own round robin:
// a listening replacement is handed one of the next few connections, while
// one that does not listen yet is handed none. The dip counts only when at
// least minMisses requests sent after it began went to the other workers (or
// failed) before the first request the replacement answered was sent.
import { isAlive } from '../../lib/harness/processes.js';

const PROBE_CONCURRENCY = 3;

/**
 * @param {object} ctx the step context (its program is watched, across steps)
 * @param {{ min?: number, intervalMs?: number, fullScanEvery?: number, maxMs?: number,
 *   serving?: { results: object[] }, toleranceMs?: number, minShare?: number }} [o]
 *   min: the count below which a sample is a dip; serving.results: the load's results (read as they come)
 * @returns {{ initial: number[], seen: Map<number, { firstAt: number, goneAt?: number }>,
 *   dips: { from: number, to?: number, count: number, pids: number[], starting: number[],
 *     ms?: number, startupMs?: number }[], samples: number, servedAt: Map<number, number>,
 *   maxGapMs: number, newPids(): number[], lowest(): object|null, stop(): void }}
 *   times are performance.now() values
 */
export function watchWorkers(
  ctx,
  { min = 0, intervalMs = 10, fullScanEvery = 5, maxMs = 30000, serving, toleranceMs = 0, minShare = 0, minMisses = 0 } = {},
) {
  const program = ctx.program;
  const initial = program.workers();
  const seen = new Map(initial.map((pid) => [pid, { firstAt: performance.now() }]));
  const servedAt = new Map(initial.map((pid) => [pid, performance.now()]));
  let alive = new Set(initial);
  let tick = 0;
  let last = performance.now();
  let openDip = null;
  let readUpTo = 0; // how far serving.results has been read
  let probing = false;
  let stopped = false;

  const outcomes = []; // { pid, start } of every request seen, load and probes (pid undefined: it failed)
  const served = (r) => {
    outcomes.push({ pid: r.pid, start: r.start });
    if (r.pid !== undefined && !servedAt.has(r.pid)) servedAt.set(r.pid, r.end ?? performance.now());
  };
  // During a dip, fresh probes while a live worker has not answered yet, so
  // that a worker that listens is counted within a round trip, not whenever
  // the load happens to reach it (round robin gives it one of the next few
  // connections). Only during a dip: probing costs CPU that a replacement
  // starting up on a 2-core machine needs.
  const probe = async () => {
    if (probing) return;
    probing = true;
    try {
      while (!stopped && !ctx.signal.aborted && openDip && [...alive].some((pid) => !servedAt.has(pid))) {
        const start = performance.now();
        const round = await Promise.all(Array.from({ length: PROBE_CONCURRENCY }, () => ctx.request('/', { timeoutMs: 2000 })));
        const end = performance.now();
        for (const r of round) served({ ...r, start, end });
        await new Promise((r) => setTimeout(r, intervalMs));
      }
    } finally {
      probing = false;
    }
  };

  const watch = {
    initial,
    seen,
    dips: [],
    samples: 0,
    maxGapMs: 0,
    newPids: () => [...seen.keys()].filter((pid) => !initial.includes(pid)),
    servedAt,
    /** The dip with the fewest workers (the longest among equals) that counts, or null. */
    lowest: () =>
      watch.dips.filter(counts).reduce((best, d) => {
        const len = (d.to ?? performance.now()) - d.from;
        if (!best || d.count < best.count || (d.count === best.count && len > (best.to ?? performance.now()) - best.from)) return d;
        return best;
      }, null),
    stop,
  };

  function sample() {
    if (program.exited) return stop();
    const now = performance.now();
    watch.maxGapMs = Math.max(watch.maxGapMs, now - last);
    last = now;
    watch.samples += 1;
    if (serving) while (readUpTo < serving.results.length) served(serving.results[readUpTo++]);
    const counted = (pids) => (serving ? pids.filter((pid) => servedAt.has(pid)) : pids);
    let current = [...alive].filter((pid) => isAlive(pid));
    if (tick++ % fullScanEvery === 0 || counted(current).length < min) {
      current = program.workers();
      if (program.exited) return stop(); // the table of a primary that just died is empty, not a dip
    }
    for (const pid of current) if (!seen.has(pid)) seen.set(pid, { firstAt: now });
    for (const pid of alive) if (!current.includes(pid)) seen.get(pid).goneAt = now;
    alive = new Set(current);
    const capacity = counted(current);
    if (capacity.length < min) {
      if (!openDip || openDip.count !== capacity.length) {
        if (openDip) openDip.to = now;
        openDip = { from: now, count: capacity.length, pids: capacity, starting: current.filter((pid) => !capacity.includes(pid)) };
        watch.dips.push(openDip);
      }
    } else if (openDip) {
      openDip.to = now;
      openDip = null;
    }
    if (openDip && serving && current.some((pid) => !servedAt.has(pid))) probe();
  }

  // Annotates a dip with the start-up of the replacement that ended it and
  // says whether it is a finding (see the header).
  function counts(d) {
    const to = d.to ?? performance.now();
    d.ms = Math.round(to - d.from);
    if (d.ms < toleranceMs) return false;
    if (!serving) return true;
    const replacements = [...seen]
      .filter(([pid, w]) => !initial.includes(pid) && w.firstAt <= to && servedAt.get(pid) >= d.from)
      .sort(([a], [b]) => servedAt.get(a) - servedAt.get(b));
    if (!replacements.length) return true; // nothing was starting: a plain loss of capacity
    const [pid, w] = replacements[0];
    d.replacement = pid;
    d.startupMs = Math.round(servedAt.get(pid) - w.firstAt);
    if (minMisses) {
      // Requests that the others answered, or that failed, sent before the first one the replacement answered.
      const firstSent = Math.min(...outcomes.filter((o) => o.pid === pid && o.start !== undefined).map((o) => o.start));
      d.misses = outcomes.filter((o) => o.pid !== pid && o.start >= d.from && o.start < firstSent).length;
    }
    return d.ms >= minShare * d.startupMs && (!minMisses || d.misses >= minMisses);
  }

  const timer = setInterval(sample, intervalMs);
  timer.unref(); // never what keeps the verifier alive
  const limit = setTimeout(stop, maxMs);
  limit.unref();
  program.exitPromise?.then(stop);

  function stop() {
    stopped = true;
    clearInterval(timer);
    clearTimeout(limit);
    if (openDip && openDip.to === undefined) openDip.to = performance.now();
  }
  return watch;
}
