// Slow requests in flight on every old worker when it retires (lesson
// rolling-restart). One slow request sent before the signal lands on one
// worker, chosen by round robin, and is over before most retirements: a
// drain that cuts requests in flight shortly after its worker stops
// listening (server.closeAllConnections() 200 ms after close(), a time limit
// far shorter than SHUTDOWN_TIMEOUT) was seen only when that request sat on
// the first worker retired, about one run in three (a blind program of round
// 12 passed 3 of 3). Here each old worker holds keep-alive connections that
// send the slow request back to back, so whenever it retires it has one in
// flight, most of it still to run.
import { keepAliveSequence } from '../../lib/harness/keepalive.js';
import { DRAIN_MS } from './drain.js';

// A request that ended less than this after it was sent met a connection the
// server was closing as the request went out (an idle keep-alive connection
// closed between two requests): the client's race, not a request cut in flight.
export const RACE_MS = 100;

/**
 * Opens keep-alive connections, each sending GET / and then `path` `count`
 * times back to back (no retry: a reset is a drop), until every one of
 * `pids` holds `perWorker` of them (or `max` are open). Call before any
 * other traffic: connections opened together are then dealt out evenly by
 * the primary's round robin.
 * @returns {Promise<{ results(): object[], spread: string, stop(): Promise<object[]> }>}
 */
export async function startSlowChains(ctx, pids, { path, count, perWorker = 2, max = 4 * pids.length, timeoutMs }) {
  const chains = [];
  const open = (n) => {
    for (let i = 0; i < n; i++) chains.push(keepAliveSequence(ctx.port, ['/', ...Array(count).fill(path)], { conn: chains.length + 1, timeoutMs, signal: ctx.signal }));
  };
  const holders = () => chains.map((c) => c.results.find((r) => r.outcome === 'ok')?.pid).filter((pid) => pid !== undefined);
  const short = () => pids.filter((pid) => holders().filter((p) => p === pid).length < perWorker);
  open(pids.length * perWorker);
  for (;;) {
    await ctx.poll(() => chains.every((c) => c.results.length > 0), { timeoutMs: 3000 });
    if (!short().length || chains.length >= max) break;
    open(Math.min(short().length, max - chains.length));
  }
  const stop = async () => (await Promise.all(chains.map((c) => c.stop()))).flat();
  ctx.onTeardown(stop);
  const held = holders();
  return {
    results: () => chains.flatMap((c) => c.results),
    spread: pids.map((pid) => `${held.filter((p) => p === pid).length} on ${pid}`).join(', '),
    stop,
  };
}

/**
 * The chains' requests cut in flight: no answer (or part of one) though sent
 * at least RACE_MS before, on a connection whose worker had not stopped
 * accepting more than DRAIN_MS before the request started (later ones are
 * the drain check's: a worker that keeps serving kept connections past its
 * drain is ended by its time limit, and that is its clients never told to leave).
 * @param {object[]} results the chains' outcomes
 * @param {Map<number, number>} stoppedAccepting pid -> when it stopped accepting new connections
 * @returns {object[]} each outcome with pid (the worker of its connection, when known)
 */
export function cutInFlight(results, stoppedAccepting, { drainMs = DRAIN_MS, raceMs = RACE_MS } = {}) {
  const cut = [];
  const byConn = new Map();
  for (const r of results) byConn.set(r.conn, [...(byConn.get(r.conn) ?? []), r]);
  for (const list of byConn.values()) {
    let pid;
    for (const r of list.sort((a, b) => a.seq - b.seq)) {
      if (!r.reused) pid = undefined; // a new connection: its worker is not known until it answers
      if (r.outcome === 'ok') {
        pid = r.pid;
        continue;
      }
      if (r.outcome === 'refused' || r.end - r.start < raceMs) continue;
      const stop = stoppedAccepting.get(pid);
      if (stop !== undefined && r.start > stop + drainMs) continue;
      cut.push({ ...r, pid });
    }
  }
  return cut;
}
