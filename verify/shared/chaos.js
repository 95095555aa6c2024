// The capstone's chaos: a schedule drawn from a seed (so a learner can replay
// a failure with --seed), the rule that excuses exactly the requests caught in
// a worker at the moment it was killed or hung, and the score card.
import { relative } from 'node:path';
import { failed } from '../../lib/harness/load.js';

/** A tiny seeded PRNG (mulberry32): the same seed gives the same numbers on every machine. */
export function prng(seed) {
  let a = seed >>> 0;
  const next = () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
  return {
    next,
    /** An integer in [min, max]. */
    int: (min, max) => min + Math.floor(next() * (max - min + 1)),
    pick: (list) => list[Math.floor(next() * list.length)],
    shuffle(list) {
      const out = [...list];
      for (let i = out.length - 1; i > 0; i--) {
        const j = Math.floor(next() * (i + 1));
        [out[i], out[j]] = [out[j], out[i]];
      }
      return out;
    },
  };
}

/** A seed for a run that was given none: printed, so the run can be replayed. */
export function freshSeed() {
  return Math.floor(Math.random() * 1_000_000);
}

// The faults and jobs that happen in any order; the crash loop needs a
// SIGUSR2 to end, so it comes after them, and SIGTERM ends everything.
const SHUFFLED = ['kill', 'kill', 'crash', 'hang', 'config', 'rolling-restart', 'increments'];

/**
 * The schedule of one seed: [{ kind, gapMs, pick }]. gapMs is the time the
 * load runs alone before the event; pick (0..1) chooses the victim among the
 * workers that qualify, so the same seed kills the same-ranked worker.
 */
export function scheduleFor(seed) {
  const rand = prng(seed);
  const kinds = [...rand.shuffle(SHUFFLED), 'crash-loop', 'shutdown'];
  return kinds.map((kind) => ({ kind, gapMs: rand.int(150, 600), pick: rand.next() }));
}

/** The command that replays a run, for failure messages. */
export function replayCommand(ctx) {
  const file = relative(process.cwd(), ctx.file) || ctx.file;
  return `npx cluster-workshop verify capstone ${file.includes(' ') ? JSON.stringify(file) : file} --seed ${ctx.data.seed}`;
}

// Two sockets closed by one death are read by the verifier's event loop a
// little apart, and a connection handed to a worker just before it died was
// sent "at that moment" too: this much either side of the moment counts.
export const SLACK_MS = 250;

/**
 * Whether a failed request is excused by a fault: it got no HTTP answer (an
 * HTTP error is the program's own doing, and a refusal means nothing was
 * listening at all), and it was in flight at the moment of a kill, or while
 * a worker was hung (from the /hang until its death).
 *
 * A fault is { kind, at, from }: `at` the moment the worker died (the kill
 * sent, or the reset of the /crash or /hang connection, which the death
 * causes), `from` the start of the window (the /hang sent; `at` otherwise).
 */
export function excusedBy(r, faults) {
  if (r.ok || r.code === 'ECONNREFUSED') return null;
  return faults.find((f) => r.start <= f.at + SLACK_MS && r.end >= (f.from ?? f.at) - SLACK_MS) ?? null;
}

/** Splits results into succeeded, excused and unexcused failures. */
export function classify(results, faults) {
  const out = { succeeded: [], excused: [], unexcused: [] };
  for (const r of results) {
    if (!failed(r)) out.succeeded.push(r);
    else if (excusedBy(r, faults)) out.excused.push(r);
    else out.unexcused.push(r);
  }
  return out;
}

/** "3 reset, 1 timeout" */
export function causes(results) {
  const counts = new Map();
  for (const r of results) {
    const cause = r.ok ? `status ${r.status}` : r.abandoned ? 'no answer' : (r.code ?? 'error').toLowerCase().replace(/^econn/, '');
    counts.set(cause, (counts.get(cause) ?? 0) + 1);
  }
  return Object.fromEntries(counts);
}

export const causesText = (byCause) =>
  Object.entries(byCause)
    .map(([cause, n]) => `${n} ${cause}`)
    .join(', ') || 'none';

/** The longest stretch without a successful answer, from the first request to the last. */
export function longestSilence(results, from, to) {
  const ends = results
    .filter((r) => !failed(r))
    .map((r) => r.end)
    .sort((a, b) => a - b);
  let longest = 0;
  let previous = from;
  for (const end of ends) {
    longest = Math.max(longest, end - previous);
    previous = end;
  }
  return Math.round(Math.max(longest, to - previous));
}

/** The score card as lines for the step log. */
export function scorecardLines(card) {
  const lines = [`score card (seed ${card.seed})${card.requests ? '' : ', so far'}:`];
  const row = (label, value) => lines.push(`  ${label.padEnd(24)} ${value}`);
  // A chaos run that stopped early has no request figures yet.
  if (card.requests) {
    row('requests sent', card.requests.sent);
    row('succeeded', card.requests.succeeded);
    row('failed, excused', `${card.requests.excused} (in flight to a worker when it was killed or hung: ${causesText(card.requests.excusedByCause)})`);
    row('failed, not excused', `${card.requests.failed} (${causesText(card.requests.failedByCause)})`);
    row('availability', `${card.availabilityPercent} %`);
    row('longest with no answer', `${card.longestNoAnswerMs} ms`);
  }
  if (card.increments) {
    const i = card.increments;
    row('increments', `${i.sent} sent, ${i.acknowledged} acknowledged, ${i.lost ?? '?'} lost (count ${i.before} -> ${i.after ?? '?'})`);
  }
  if (card.crashLoop) {
    const c = card.crashLoop;
    row(
      'crash loop',
      (c.survivors?.length
        ? `worker ${c.survivors.join(', ')} ignored POISON_FILE (kept running); `
        : `${c.startupDeaths} workers died at start-up; ${c.contained ? `contained after ${(c.containedAfterMs / 1000).toFixed(1)} s` : 'NOT contained'}; `) +
        `${c.recovered ? `serving with ${c.workersAfter} workers ${(c.recoveredAfterMs / 1000).toFixed(1)} s after SIGUSR2` : 'did not recover after SIGUSR2'}`,
    );
  }
  if (card.shutdown) {
    const s = card.shutdown;
    row(
      'shutdown',
      s.exit
        ? `${s.exit.signal ? `killed by ${s.exit.signal}` : `exit code ${s.exit.code}`} after ${(s.ms / 1000).toFixed(2)} s; ` +
            (s.accepting ? (s.accepting.refused ? `new connections refused after ${s.accepting.ms} ms; ` : `still accepting new connections after the signal (${s.accepting.accepted} accepted); `) : '') +
            `/slow ${s.slow}; ` +
            `${s.leftover.length ? `left ${s.leftover.join(', ')}` : 'no process left'}; ${s.respawned.length ? `forked ${s.respawned.join(', ')} during shutdown` : 'no respawn'}`
        : `the primary was still running ${(s.ms / 1000).toFixed(1)} s after SIGTERM`,
    );
  }
  return lines;
}
