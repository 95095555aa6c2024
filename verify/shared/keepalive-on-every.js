// Keep-alive clients spread over a set of workers (lessons rolling-restart,
// beyond-one-machine). The primary decides where a new connection goes
// (round robin, in the order workers are free), so groups of clients are
// opened until every worker holds its share: each worker that is retired
// then certainly has busy keep-alive connections when it stops listening,
// every run, and only those show whether it sends its clients away.
import { setMaxListeners } from 'node:events';
import { startKeepAliveClients } from '../../lib/harness/keepalive.js';

/**
 * Starts `initial` clients, then `more` at a time until each of `pids` holds
 * at least `perWorker` connections (or `max` are open). Each group is stopped
 * at teardown; with `signal`, also when it aborts (one listener on it,
 * however many groups).
 * @returns {Promise<{ results: object[], count: number, spread: string, stop(): Promise<object[]> }>}
 *   count: connections whose worker is known; spread: how many each of pids holds, in words
 */
export async function keepAliveOnEvery(ctx, pids, { port, host, path, timeoutMs, localAddresses, perWorker, initial, more = 2, max, signal }) {
  const groups = [];
  const results = () => groups.flatMap((g) => g.results);
  const holders = () => {
    const firstPid = new Map();
    for (const r of results()) if (r.outcome === 'ok' && r.pid !== undefined && !firstPid.has(r.conn)) firstPid.set(r.conn, r.pid);
    return [...firstPid.values()];
  };
  const enough = () => {
    const held = holders();
    return pids.every((pid) => held.filter((p) => p === pid).length >= perWorker);
  };
  const opened = () => groups.reduce((sum, g) => sum + g.size, 0);
  const local = signal ? new AbortController() : null;
  const abortLocal = () => local.abort();
  if (local) {
    setMaxListeners(max + 1, local.signal);
    signal.addEventListener('abort', abortLocal, { once: true });
  }
  const add = async (n) => {
    const g = startKeepAliveClients(port, { connections: n, host, path, timeoutMs, localAddresses, signal: local?.signal, firstConn: 1 + opened() });
    g.size = n;
    groups.push(g);
    ctx.onTeardown(() => g.stop());
    // Every connection of the group has been answered (and so reused) once: its worker is known.
    await ctx.poll(() => new Set(g.results.filter((r) => r.outcome === 'ok').map((r) => r.conn)).size >= n, { timeoutMs: 3000 });
  };
  await add(initial);
  while (!enough() && opened() < max) await add(more);
  const held = holders();
  return {
    get results() {
      return results();
    },
    count: held.length,
    spread: pids.map((pid) => `${held.filter((p) => p === pid).length} on ${pid}`).join(', '),
    async stop() {
      await Promise.all(groups.map((g) => g.stop()));
      signal?.removeEventListener('abort', abortLocal);
      return results();
    },
  };
}
