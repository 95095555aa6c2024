// Whether a program stops taking new connections as soon as its shutdown
// begins, while a request is still in flight: the contract's "every worker
// stops accepting connections (worker.disconnect())", shared by
// graceful-shutdown, containers and capstone.
//
// Why the keep-alive clients cannot judge it: once the whole program is
// shutting down nobody can answer a new connection, so drain.js counts a new
// connection refused or reset after the signal as turned away. A worker that
// drains without closing its server (http-terminator's terminate() closes it
// only at the very end, and destroys every connection that arrives
// meanwhile) keeps the port open for as long as its slowest request, and
// resets every connection the primary hands it in that time. A client cannot
// tell that from a request lost mid-way; a refused one it can retry anywhere.
// So the verifier looks at the port itself, while a request it knows is still
// running keeps the drain going.
import { portInUse } from '../../lib/harness/ports.js';
import { pollUntil } from '../../lib/harness/wait.js';

const POLL_MS = 50;

/**
 * Opens a connection every 50 ms from now on, until one is refused or
 * `withinMs` pass. Call it right after the signal. Not tied to the step that
 * calls it (it is bounded by withinMs): a step may start it and end first,
 * as containers' pid1-sigterm does when PID 1 exits at once, and a later
 * step reads the result.
 * @returns {Promise<{ refused: boolean, ms: number, accepted: number }>}
 *   ms: how long after the call the first refusal came; accepted: connections taken before it
 */
export async function watchStopsAccepting(ctx, { withinMs }) {
  let accepted = 0;
  const r = await pollUntil(
    async () => {
      if (!(await portInUse(ctx.port))) return true;
      accepted += 1;
      return false;
    },
    { timeoutMs: withinMs, intervalMs: POLL_MS },
  );
  return { refused: r.ok, ms: Math.round(r.ms), accepted };
}

/**
 * The failure of a program still accepting `withinMs` after its signal.
 * @param {{ port: number, withinMs: number, accepted: number, signal: string, inFlight: string }} o
 *   signal: what began the shutdown ('SIGTERM', 'SIGTERM to the process group');
 *   inFlight: the request that was still running ('/slow?ms=2000')
 */
export function stillAcceptingFailure({ port, withinMs, accepted, signal, inFlight }) {
  return {
    message: `The program still accepted new connections ${withinMs / 1000} s after ${signal}, while ${inFlight} was still in flight.`,
    expected: `every worker stops accepting at the signal (worker.disconnect() closes its server), so the port refuses new connections while the requests in flight finish`,
    actual: `every one of ${accepted} connections opened to port ${port} in the ${withinMs / 1000} s after the signal was accepted`,
    explanation:
      'While the port still takes connections, the primary hands them to workers that are shutting down. A worker that drains without closing its server either ends them unanswered (their clients cannot tell whether the request was lost, so they cannot safely retry it elsewhere) or serves new clients for as long as they come. ' +
      'Possible causes: the primary never calls worker.disconnect() (it only messages or signals the workers); a worker drains with a library whose terminate() closes the server only at the end (http-terminator: call worker.disconnect() as well, or server.close() first); the primary itself listens on the port.',
    hint: 'on the signal, call worker.disconnect() on every worker: each closes its server at once, and finishes its requests in flight after.',
  };
}
