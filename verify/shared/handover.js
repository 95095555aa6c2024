// A worker killed while the primary is handing it a connection: in round
// robin the primary accepts each connection and sends it to a free worker
// over the IPC channel. A worker that dies with such a message unread ends
// its channel in an error: the primary gets 'exit' for it but no
// 'disconnect'. The verifier arranges that state on purpose instead of
// hoping a kill under load lands in it.
import { connectionsHeld } from '../../lib/harness/sockets.js';
import { startInFlight } from './inflight.js';

// Long enough that the worker is still busy when it is killed, however slow
// the machine: the kill ends it anyway.
const BUSY_PATH = '/heavy?ms=5000';
const ATTEMPTS = 3;

/**
 * Makes one worker busy (GET /heavy?ms=5000, read by it before this returns),
 * then opens fresh connections until the primary has handed that worker one
 * it cannot read: round robin gives each free worker its turn, and the busy
 * one never answers, so of 2n requests all but one come back. Resolves
 * { victim, pending, heavy }: the busy worker's pid, whether a connection is
 * certainly waiting in its channel (false where the primary does not deal
 * connections out, or off Linux where the holder is not known), and the
 * /heavy result. Every request here is lost with the victim: callers excuse
 * requests sent before its death.
 */
export async function busyWithPendingConnection(ctx, workers) {
  let last;
  for (let attempt = 1; attempt <= ATTEMPTS; attempt++) {
    last = await tryOnce(ctx, workers);
    if (last.pending || !last.holderKnown) break;
  }
  return last;
}

async function tryOnce(ctx, workers) {
  const { result: heavy } = await startInFlight(ctx, BUSY_PATH);
  const holder = await ctx.poll(() => workers.find((pid) => connectionsHeld(ctx.port, [pid]) > 0), { timeoutMs: 1000, intervalMs: 5 });
  if (!holder.ok) return { victim: workers[0], pending: false, holderKnown: false, heavy };
  const count = 2 * workers.length;
  let answered = 0;
  for (let i = 0; i < count; i++) ctx.request('/', { timeoutMs: 3000 }).then((r) => r.ok && (answered += 1));
  const waiting = await ctx.poll(() => answered >= count - 1, { timeoutMs: 3000, intervalMs: 5 });
  return { victim: holder.value, pending: waiting.ok && answered === count - 1, holderKnown: true, heavy };
}
