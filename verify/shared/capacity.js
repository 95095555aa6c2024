// How many workers accepted new connections at each moment of a restart,
// from the answers to fresh connections (one connection per request): a
// worker accepted a connection somewhere between the request's start and its
// answer. Judged in the program's favour: an old worker counts as accepting
// until the answer to the last fresh connection it took (end), a replacement
// from the start of the first one it took (start). A gap between the two is
// then at least that long for real.
//
// A replacement the verifier held stopped (shared/throttle.js) accepted
// nothing while held: it counts from its release at the earliest. One held
// after it asked the primary for the server is already in the primary's
// round robin and is handed a connection that waits out the hold; counting
// it from that connection's start would hide the dip the hold is there to
// show.
//
// Old workers that are still among the final workers count to the end; a
// replacement retired in turn (a second restart) stops at its last answer.
//
// Every connection the verifier opens takes its turn in the primary's round
// robin, the late senders' (shared/late-senders.js) as much as the load's, so
// both count: the round robin hands out turns in a fixed order, and when two
// streams of connections interleave in step a worker's turns can all fall on
// one stream for a second (measured in stress: an old worker that was still
// to retire took only late senders' connections for 470 and 1290 ms while 8
// and 6 of the load's went to the two others, a dip that was not there).
//
// A gap is evidence only if the load kept going through it: at least
// MIN_EVIDENCE requests started inside it were answered, all by the workers
// that accepted (round robin hands a worker that accepts one of every few
// connections). A verifier starved of CPU sends nothing for a while, and a
// gap in its data is no gap in the program's capacity. Or if at least
// MIN_EVIDENCE requests waited through it for a held replacement: when no
// worker serves at all, the load's requests all wait and few start, and a
// program that did everything right has at most one such request per held
// replacement (the one round robin handed it).
export const MIN_EVIDENCE = 6;

/**
 * @param {{ results: object[], old: number[], final: number[], from: number, to: number, n: number, toleranceMs: number, heldUntil?: Map<number, number>, lateSenders?: object[] }} o
 *   results: fresh-connection outcomes { pid, start, end, ok, status }; old: the workers before the restart;
 *   final: the workers after it; from/to: the window judged; heldUntil: when each replacement the
 *   verifier held was let go; lateSenders: the late senders' outcomes (shared/late-senders.js),
 *   counted as results are (start: when the connection opened)
 * @returns {{ dips: { from: number, to: number, ms: number, count: number, accepting: number[], steady: boolean, evidence: number, waited: number }[],
 *   timeline: Map<number, { first: number, last: number }> }}
 */
export function acceptDips({ results: load, old, final, from, to, n, toleranceMs, heldUntil = new Map(), lateSenders = [] }) {
  const results = [...load, ...lateSenders];
  const timeline = new Map();
  for (const r of results) {
    if (!r.ok || r.status !== 200 || r.pid === undefined) continue;
    const t = timeline.get(r.pid) ?? { first: Infinity, last: -Infinity };
    t.first = Math.min(t.first, r.start);
    t.last = Math.max(t.last, r.end);
    timeline.set(r.pid, t);
  }
  for (const [pid, t] of timeline) if (!old.includes(pid) && heldUntil.has(pid)) t.first = Math.max(t.first, heldUntil.get(pid));
  const intervals = [];
  for (const pid of old) {
    const t = timeline.get(pid);
    intervals.push({ pid, from: -Infinity, to: final.includes(pid) ? Infinity : (t?.last ?? -Infinity) });
  }
  for (const [pid, t] of timeline) {
    if (old.includes(pid)) continue;
    intervals.push({ pid, from: t.first, to: final.includes(pid) ? Infinity : t.last });
  }
  // Sweep the moments where the count can change.
  const points = [...new Set([from, to, ...intervals.flatMap((i) => [i.from, i.to]).filter((x) => x > from && x < to)])].sort((a, b) => a - b);
  const dips = [];
  let open = null;
  for (let i = 0; i < points.length - 1; i++) {
    const at = (points[i] + points[i + 1]) / 2;
    const accepting = intervals.filter((iv) => iv.from <= at && at < iv.to).map((iv) => iv.pid);
    if (accepting.length < n) {
      // One dip for as long as fewer than n accept, however the count steps
      // (3 old workers retired 300 ms apart, replacements held: 2, 1, 0, 1,
      // 2 workers, each step shorter than the tolerance, 1.4 s in all; the
      // capstone passed it). count: the fewest at any moment.
      if (open) {
        open.to = points[i + 1];
        open.steady &&= accepting.length === open.count;
        if (accepting.length < open.count) Object.assign(open, { count: accepting.length, accepting });
      } else {
        open = { from: points[i], to: points[i + 1], count: accepting.length, accepting, steady: true };
        dips.push(open);
      }
    } else open = null;
  }
  const answered = results.filter((r) => r.ok && r.status === 200 && r.pid !== undefined);
  const waitsForHeld = (r) => !old.includes(r.pid) && heldUntil.has(r.pid) && r.start < heldUntil.get(r.pid);
  const waitedForHeld = answered.filter(waitsForHeld);
  for (const d of dips) {
    d.ms = Math.round(d.to - d.from);
    d.evidence = answered.filter((r) => r.start >= d.from && r.start < d.to && !waitsForHeld(r)).length;
    d.waited = waitedForHeld.filter((r) => r.start < d.to && r.end > d.from).length;
  }
  return { dips: dips.filter((d) => d.ms >= toleranceMs && (d.evidence >= MIN_EVIDENCE || d.waited >= MIN_EVIDENCE)), timeline };
}

// A shortfall of accepting workers longer than this is a dip. A correct
// restart shows none in the accept timeline, or one as short as the spacing
// of the load's requests to one worker (tens of ms; 300 ms was measured once
// with one request at a time on a loaded machine, hence two or more at a
// time); retiring on 'online' shows at least the hold of shared/throttle.js
// (HOLD_MS) plus the replacement's own start-up.
export const DIP_TOLERANCE_MS = 400;

const failedResult = (r) => !r.ok || r.status !== 200;

/**
 * The failure of a dip, in the words of every lesson that restarts (rolling-restart, capstone).
 * replacements: every new worker seen during the restart; alive(pid): whether it still runs. A
 * replacement that died by the end of the dip is named, with the causes of such a death, since
 * the dip may be its doing rather than a retirement that came too early.
 */
export function capacityFailure({ dips, timeline, old, signalAt, results, workers, what = 'the restart', holdMs, replacements = [], alive = () => true }) {
  const at = (t) => `${Math.round(t - signalAt)} ms`;
  const worst = dips.reduce((a, b) => (b.count < a.count || (b.count === a.count && b.ms > a.ms) ? b : a));
  // Replacements that died by the end of the dip (not retired afterwards by a queued restart): gone now, and their last answer, if any, came before the dip ended.
  const gone = replacements.filter((pid) => !old.includes(pid) && !alive(pid) && !(timeline.get(pid)?.last > worst.to));
  const stoppedBefore = old.filter((pid) => timeline.get(pid)?.last <= worst.from + 1 && timeline.get(pid)?.last > signalAt);
  const startedAfter = [...timeline].filter(([pid, t]) => !old.includes(pid) && t.first >= worst.to - 1).map(([pid]) => pid);
  const noneFailed = !results.some(failedResult);
  return {
    message: worst.steady
      ? `${worst.count ? `Only ${worst.count} worker${worst.count === 1 ? '' : 's'}` : 'No worker'} accepted new connections for ${worst.ms} ms during ${what}, WORKERS=${workers}.`
      : `Fewer than ${workers} workers accepted new connections for ${worst.ms} ms during ${what} (${worst.count ? `only ${worst.count}` : 'none'} at the worst), WORKERS=${workers}.`,
    expected: `at least ${workers} workers accepting at every moment: an old worker stops accepting only after its replacement has accepted`,
    actual:
      (worst.steady
        ? `from ${at(worst.from)} to ${at(worst.to)} after SIGUSR2 ${worst.count ? `only ${worst.accepting.join(', ')}` : 'none'} accepted`
        : `from ${at(worst.from)} to ${at(worst.to)} after SIGUSR2 fewer than ${workers} accepted, at the worst ${worst.count ? `only ${worst.accepting.join(', ')}` : 'none'}`) +
      (stoppedBefore.length === 1 ? `; old worker ${stoppedBefore[0]} took its last new connection at ${at(timeline.get(stoppedBefore[0]).last)}` : '') +
      (stoppedBefore.length > 1 ? `; old workers ${stoppedBefore.join(', ')} took their last new connections by ${at(Math.max(...stoppedBefore.map((pid) => timeline.get(pid).last)))}` : '') +
      (startedAfter.length ? `; replacement ${startedAfter[0]} took its first at ${at(timeline.get(startedAfter[0]).first)}` : '') +
      (worst.evidence >= MIN_EVIDENCE
        ? `; ${worst.evidence} requests sent meanwhile ${worst.steady ? `all went to ${worst.count === 1 ? 'that one' : `those ${worst.count}`}` : 'all went to the workers still accepting'}`
        : `; ${worst.waited} requests waited meanwhile until a replacement held by the verifier was let go`),
    explanation:
      (noneFailed && worst.count ? 'No request failed: the remaining workers took the connections, and at this light load they kept up. ' : '') +
      (noneFailed && !worst.count ? 'No request failed: they waited, unanswered, until a replacement could take them. ' : '') +
      `But for that time the cluster ran at ${worst.count}/${workers} of its capacity: under real traffic that is a latency spike at every deploy. ` +
      (gone.length
        ? `Replacement${gone.length === 1 ? '' : 's'} ${gone.join(', ')} exited during ${what}, and a replacement that dies leaves the cluster short until another is forked and listens. Possible causes: it crashed at start-up, or the primary killed it (a heartbeat or start-up check too strict for a slow start: the verifier paused each replacement right after its 'online', as a loaded machine might); or an old worker stopped accepting before its replacement could (retired on 'online', or before the replacement was forked).`
        : "The old worker stopped accepting before its replacement could: it was retired before the replacement listened, for example on 'online' (the new process runs, but your code has not loaded yet: 'online' comes well before 'listening'), or before the replacement was forked.") +
      (holdMs && !gone.length ? ` The verifier held each replacement for ${holdMs} ms right after its 'online', as a loaded machine might, so this shows every run.` : ''),
    hint: gone.length
      ? "find out why the replacement exited (its output above); a heartbeat check must allow a new worker time to start (count from its 'listening', not its fork). Then: fork the replacement first, wait for its 'listening' event, and only then worker.disconnect() the old one."
      : "fork the replacement first, wait for its 'listening' event (not 'online'), and only then worker.disconnect() the old one.",
  };
}
