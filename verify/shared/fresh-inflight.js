// A request in flight that a signal sent next certainly finds unfinished.
// A /slow?ms=N request cannot finish sooner than N ms after it was sent, but
// startKeepAliveInFlight resolves once the kernel shows it read, and a
// verifier short of CPU may see that only much later than it happened (1132
// ms after sending a 1000 ms request, in stress): its signal then came after
// the answer, and a worker that dies on the signal passed graceful-shutdown.
// So a request seen read more than freshMs after it was started is dropped
// and sent again on a new connection (ATTEMPTS times at most). The age is
// counted from before the connection's first request, an upper bound.
import { startKeepAliveInFlight } from './inflight.js';

const ATTEMPTS = 5;

/**
 * startKeepAliveInFlight (shared/inflight.js), resolving only while `path`
 * was started at most freshMs ago. Pass about 3/4 of what it takes to answer:
 * the rest is the margin for the signal the caller sends next.
 */
export async function startFreshKeepAliveInFlight(ctx, path, { freshMs, ...options }) {
  for (let attempt = 1; ; attempt++) {
    const startedAt = performance.now();
    const slow = await startKeepAliveInFlight(ctx, path, options);
    // Not sent, or already over (refused, reset, answered): the step reports what happened.
    if (slow.results[1] !== undefined || slow.results[0]?.outcome !== 'ok') return slow;
    const age = performance.now() - startedAt;
    if (age <= freshMs || attempt === ATTEMPTS) return slow;
    ctx.log(`${path} was seen read ${Math.round(age)} ms after it was sent (the verifier was short of CPU): sent again on a new connection, so that the signal certainly finds it unfinished`);
    await slow.stop();
  }
}
