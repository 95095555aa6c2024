// The keep-alive drain check shared by every lesson that stops or retires
// workers (graceful-shutdown, rolling-restart, capstone): what the keep-alive
// clients of lib/harness/keepalive.js saw, judged by one set of rules, with
// one set of messages.
//
// The rules (issue 11's contract):
// - a request reset on a reused connection before any byte of its answer is
//   retried once on a new connection (the client does it): a retry, never a
//   failure;
// - a response cut after it began is a failure;
// - a request not answered (after its retry) is a failure, except once the
//   whole server has stopped taking connections (a shutdown): a new
//   connection refused, or closed unanswered, then is the server being gone
//   (and, where the caller says so, one that hangs with no byte until the
//   client's timeout: see hangsOnceStopped);
// - a worker retired at time t (disconnected) may answer keep-alive clients
//   until t + DRAIN_MS + what its requests in flight at t still needed; an
//   answer after that means its clients were never told to leave.

export const DRAIN_MS = 3000;

const describeSeconds = (ms) => `${(ms / 1000).toFixed(1)} s`;
// Answers are timed when the verifier reads them, a little after the worker
// sent them: room for that, never for a worker that keeps serving.
export const DRAIN_TOLERANCE_MS = 300;

/**
 * Sorts keep-alive outcomes into what they mean.
 * @param {object[]} results outcomes from lib/harness/keepalive.js
 * @param {{ stoppedAt?: number, hangsOnceStopped?: boolean, excuse?: (r: object, lastPid: number|undefined) => boolean }} [o]
 *   stoppedAt: when the server was told to stop taking connections (a shutdown's signal);
 *   hangsOnceStopped: a new connection opened after stoppedAt that got no byte before the client's timeout is
 *   turned away too. Node's cluster primary can strand one: a connection it handed to the last listening worker
 *   as that worker closed comes back refused, and the primary queues it on a listening handle it has just closed,
 *   where nothing ever takes it (RoundRobinHandle.distribute after remove). Only where every worker stops at
 *   once under a program's own control (PM2's pm2 stop all), never where workers are replaced;
 *   excuse: failures to forgive (a request on a connection of a worker the verifier killed); lastPid: the worker
 *   that answered the previous request of the same connection
 * @returns {{ answered: number, retries: object[], cut: object[], unanswered: object[], badStatus: object[],
 *   turnedAway: number, excused: object[] }}
 */
export function classifyKeepAlive(results, { stoppedAt = Infinity, hangsOnceStopped = false, excuse = () => false } = {}) {
  const out = { answered: 0, retries: [], cut: [], unanswered: [], badStatus: [], turnedAway: 0, excused: [] };
  const lastPid = new Map(); // conn -> pid of its previous answer
  const ordered = [...results].sort((a, b) => a.conn - b.conn || a.seq - b.seq);
  for (const r of ordered) {
    const previous = lastPid.get(r.conn);
    if (r.outcome === 'ok') {
      lastPid.set(r.conn, r.pid);
      if (r.retried) out.retries.push(r);
      if (r.status !== 200) out.badStatus.push(r);
      else out.answered += 1;
      continue;
    }
    lastPid.delete(r.conn); // the connection ended: the next request opens a new one
    if (excuse(r, previous)) {
      out.excused.push(r);
      continue;
    }
    if (r.outcome === 'cut') {
      out.cut.push(r);
      continue;
    }
    // No byte of an answer: on a new connection (or a retry) once the server
    // stopped taking connections, that is the server gone, not a failure.
    const fresh = !r.reused || r.retried;
    const gone = r.outcome === 'refused' || r.outcome === 'unanswered' || (hangsOnceStopped && r.outcome === 'timeout' && !r.bytes);
    if (gone && fresh && r.start >= stoppedAt) {
      out.turnedAway += 1;
      continue;
    }
    out.unanswered.push(r);
  }
  return out;
}

/**
 * Workers that went on answering keep-alive clients too long after they
 * were retired.
 * @param {object[]} results keep-alive outcomes (and any other request with pid, start, end, outcome)
 * @param {Map<number, number>} retiredAt pid -> when it was disconnected (or stopped accepting)
 * @returns {{ pid: number, retiredAt: number, deadline: number, lastAt: number, late: number,
 *   keepAliveAfter: number, busyMs: number }[]} late: answers after the deadline;
 *   keepAliveAfter: answers after retiredAt that still said keep-alive
 */
export function lingeringWorkers(results, retiredAt, { drainMs = DRAIN_MS, toleranceMs = DRAIN_TOLERANCE_MS } = {}) {
  const found = [];
  for (const [pid, at] of retiredAt) {
    const mine = results.filter((r) => r.pid === pid && r.outcome === 'ok');
    // What its requests in flight at `at` still needed.
    const inFlightEnd = Math.max(at, ...mine.filter((r) => r.start < at).map((r) => r.end));
    const deadline = inFlightEnd + drainMs + toleranceMs;
    const after = mine.filter((r) => r.end > at);
    const late = after.filter((r) => r.end > deadline);
    if (!late.length) continue;
    const lastAt = Math.max(...late.map((r) => r.end));
    found.push({
      pid,
      retiredAt: at,
      deadline,
      lastAt,
      late: late.length,
      keepAliveAfter: after.filter((r) => r.keepAlive).length,
      busyMs: Math.round(lastAt - at),
    });
  }
  return found.sort((a, b) => b.busyMs - a.busyMs);
}

/** The failure of a worker its keep-alive clients never left, in the words of every lesson that drains. */
export function lingeringFailure(worst, { what = 'its disconnect', all = [worst] } = {}) {
  const others = all.length > 1 ? ` (and ${all.length - 1} more worker${all.length > 2 ? 's' : ''})` : '';
  return {
    message: `A keep-alive client kept worker ${worst.pid} busy for ${describeSeconds(worst.busyMs)} after ${what}${others}: answer with Connection: close once the server no longer listens.`,
    expected: `worker ${worst.pid} tells its keep-alive clients to leave (Connection: close) and exits within ${DRAIN_MS / 1000} s of ${what}, plus what its requests in flight still need`,
    actual: `it answered ${worst.late} request${worst.late === 1 ? '' : 's'} later than that, ${worst.keepAliveAfter} of its answers after ${what} said Connection: keep-alive; the last ${describeSeconds(worst.busyMs)} after it`,
    explanation:
      "server.close() (which worker.disconnect() calls) closes only the connections idle at that instant. A client that reuses its connection (browsers, Node's agent since Node 19, nginx, load balancers) keeps sending, Node keeps answering Connection: keep-alive, and the worker never empties: it lives until a time limit kills it, cutting the request it was answering.",
    hint: "in the worker, a middleware that runs first: if (!server.listening) res.setHeader('Connection', 'close'); and at the time limit, server.closeAllConnections().",
  };
}

/** One line per kind of failure, for "actual:". */
export function describeKeepAliveFailures(c) {
  const parts = [];
  if (c.cut.length) parts.push(`${c.cut.length} response${c.cut.length === 1 ? '' : 's'} cut after ${c.cut.length === 1 ? 'it' : 'they'} began (first: ${c.cut[0].path}, ${c.cut[0].bytes} bytes received)`);
  if (c.unanswered.length) {
    const first = c.unanswered[0];
    parts.push(`${c.unanswered.length} request${c.unanswered.length === 1 ? '' : 's'} not answered${first.retried ? ' even after a retry on a new connection' : ''} (first: ${first.path}, ${first.outcome}${first.code ? `, ${first.code}` : ''})`);
  }
  if (c.badStatus.length) parts.push(`${c.badStatus.length} answered with a status other than 200 (first: ${c.badStatus[0].status})`);
  return parts.join('; ');
}

/** A log line: what the keep-alive clients saw. */
export function summarizeKeepAlive(results, c) {
  return (
    `keep-alive clients: ${results.length} requests, ${c.answered} answered` +
    (c.retries.length ? `, ${c.retries.length} retried once on a new connection (reset before any byte on a reused one)` : '') +
    (c.turnedAway ? `, ${c.turnedAway} turned away once the server had stopped` : '') +
    (c.excused.length ? `, ${c.excused.length} lost with a worker the verifier killed` : '')
  );
}

/**
 * The failure of keep-alive clients cut off by a shutdown (graceful-shutdown,
 * capstone): `problems` is describeKeepAliveFailures' line.
 */
export function cutOnShutdownFailure(problems) {
  return {
    message: `The keep-alive clients were cut off during the shutdown, not drained: ${problems.split(';')[0]}.`,
    expected: 'every request answered (a request reset before any byte on a reused connection is retried once on a new one); no response cut after it began',
    actual: problems,
    explanation:
      'A response cut after it began means the connection was closed (server.closeAllConnections(), a kill, process.exit) while the worker was writing it. A request with no answer even on a new connection means no worker took it although the server still listened.',
    hint: "close connections only between requests: Connection: close on every answer once the server no longer listens (if (!server.listening) res.setHeader('Connection', 'close')), and server.closeAllConnections() only at the time limit.",
  };
}
