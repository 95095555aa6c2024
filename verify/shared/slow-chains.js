// Slow requests in flight on every old worker when it retires (lesson
// rolling-restart). One slow request sent before the signal lands on one
// worker, chosen by round robin, and is over before most retirements: a
// drain that cuts requests in flight shortly after its worker stops
// listening (server.closeAllConnections() 200 ms after close(), a time limit
// far shorter than SHUTDOWN_TIMEOUT) was seen only when that request sat on
// the first worker retired, about one run in three (a blind program of round
// 12 passed 3 of 3). Here each old worker holds keep-alive connections that
// send a slow request back to back, two of them half a request apart, so
// whenever it retires it has one in flight with at least half of it still to
// run: a time limit shorter than that (blind round 13: a hard-coded 1 s)
// cuts it every run, not when the phase happens to fall right.
import { setMaxListeners } from 'node:events';
import { keepAliveSequence } from '../../lib/harness/keepalive.js';

// A request that ended less than this after it was sent met a connection the
// server was closing as the request went out (an idle keep-alive connection
// closed between two requests): the client's race, not a request cut in flight.
export const RACE_MS = 100;
// When a worker stopped accepting is known from the answers around it, a few
// milliseconds either way on a busy machine: a request started this soon after
// still counts as in flight then.
const STOP_TOLERANCE_MS = 200;

/**
 * Opens keep-alive connections, each sending GET / and then GET
 * /slow?ms=`slowMs` `count` times back to back (no retry: a reset is a
 * drop); those of the second phase first send one GET /slow?ms=slowMs/2, so
 * that they run half a request behind. Opens more until every one of `pids`
 * holds one of each phase (or `max` are open). Call before any other
 * traffic: connections opened together are then dealt out in turn by the
 * primary's round robin, the first pids.length (phase 0) one to each worker,
 * the next ones (phase 1) the same.
 * @returns {Promise<{ results(): object[], spread: string, stop(): Promise<object[]> }>}
 */
export async function startSlowChains(ctx, pids, { slowMs, count, max = 4 * pids.length, timeoutMs }) {
  const chains = [];
  // One listener on the step's signal however many chains there are (more
  // than 10 on one signal make Node print a leak warning to the learner).
  const local = new AbortController();
  setMaxListeners(max + 1, local.signal);
  const abortLocal = () => local.abort();
  ctx.signal.addEventListener('abort', abortLocal, { once: true });
  const open = (phase) => {
    const paths = ['/', ...(phase ? [`/slow?ms=${slowMs / 2}`] : []), ...Array(count).fill(`/slow?ms=${slowMs}`)];
    const chain = keepAliveSequence(ctx.port, paths, { conn: chains.length + 1, timeoutMs, signal: local.signal });
    chains.push(Object.assign(chain, { phase }));
  };
  const holderOf = (c) => c.results.find((r) => r.outcome === 'ok')?.pid;
  const missing = () => [0, 1].flatMap((phase) => pids.filter((pid) => !chains.some((c) => c.phase === phase && holderOf(c) === pid)).map(() => phase));
  for (const phase of [0, 1]) for (let i = 0; i < pids.length; i++) open(phase);
  for (;;) {
    await ctx.poll(() => chains.every((c) => c.results.length > 0), { timeoutMs: 3000 });
    const wanted = missing();
    if (!wanted.length || chains.length >= max) break;
    for (const phase of wanted.slice(0, max - chains.length)) open(phase);
  }
  const stop = async () => {
    const results = (await Promise.all(chains.map((c) => c.stop()))).flat();
    ctx.signal.removeEventListener('abort', abortLocal);
    return results;
  };
  ctx.onTeardown(stop);
  const spread = pids.map((pid) => `${chains.filter((c) => holderOf(c) === pid).map((c) => (c.phase ? 'b' : 'a')).join('') || 'none'} on ${pid}`).join(', ');
  return { results: () => chains.flatMap((c) => c.results), spread, stop };
}

/**
 * The chains' requests cut in flight: no answer (or part of one) though sent
 * at least RACE_MS before, on a connection whose worker had not yet stopped
 * accepting new connections when the request started (give or take
 * `toleranceMs`, as stoppedAccepting is known from answers). Later ones are
 * left to the drain check: a worker that keeps serving kept connections
 * after it stopped listening never told their clients to leave, and its time
 * limit may end one of them; that is not a request it had in flight.
 * @param {object[]} results the chains' outcomes
 * @param {Map<number, number>} stoppedAccepting pid -> when it stopped accepting new connections
 * @returns {object[]} each outcome with pid (the worker of its connection, when known)
 */
export function cutInFlight(results, stoppedAccepting, { toleranceMs = STOP_TOLERANCE_MS, raceMs = RACE_MS } = {}) {
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
      if (pid === undefined || (stop !== undefined && r.start > stop + toleranceMs)) continue;
      cut.push({ ...r, pid });
    }
  }
  return cut;
}
