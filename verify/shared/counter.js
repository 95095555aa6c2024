// Checks of a cluster-wide counter (POST /count, GET /count), shared by the
// lessons that keep it in the primary (shared-state) and in Redis
// (redis-state). Each lesson supplies its own explanation of the causes.
import { setMaxListeners } from 'node:events';
import { connectionsHeld, unreadConnections } from '../../lib/harness/sockets.js';
import { trySignal } from '../../lib/harness/processes.js';
import { sleepFor } from '../../lib/harness/context.js';
import { pipelined, pipelinedReproduce } from '../../lib/harness/pipelined.js';

// Of the burst, this many pairs go pipelined: two requests written at once on
// one connection, which the worker parses in one go, so it certainly holds
// two requests at once (see lib/harness/pipelined.js).
const PIPELINED_PAIRS = 30;
// holdPrimary: the longest the primary stays paused, and the margin after the
// last request was read (see expectUniqueIncrements).
const HOLD_LIMIT_MS = 2000;
const ASK_MARGIN_MS = 50;


/**
 * Sends `total` POST /count at once (most over fresh connections, 30 pairs
 * pipelined on one connection each) and fails unless they answered exactly
 * 1..total, each once, spread over every worker. `causes` explains a finding
 * in the lesson's terms:
 *   perWorker: { explanation, hint } when every worker counted on its own
 *   duplicates({ samePid, crossPid }): { explanation, hint }
 *   noAnswer: { explanation, hint } when requests got no answer
 * holdPrimary (the count lives in the primary): the primary is paused
 * (SIGSTOP) from just before the burst is sent until every worker has read its
 * requests, so that every worker has asked, many questions at once, before any
 * answer comes. A reply matched to the wrong question (ids that repeat across
 * workers, a reply sent to every worker, or to whichever asked last) then
 * shows every run; without the pause, on a starved machine, one worker can
 * ask and get its answers before the next has asked anything, and hide it.
 * Returns the results.
 */
export async function expectUniqueIncrements(ctx, { total = 300, causes, holdPrimary = false }) {
  const workers = ctx.workers();
  // Every request in flight listens on the step's abort signal.
  setMaxListeners(total + 20, ctx.signal);
  // Every connection first, handed to the workers, then every request at the
  // same moment: each worker then holds many requests at once, as under real
  // traffic. Sent as they connect, on a starved machine they can reach a
  // worker one at a time (the primary hands a worker its next connection only
  // once it took the last), and a worker that never has two requests in
  // flight hides replies matched to the wrong request.
  let open;
  const gate = new Promise((resolve) => (open = resolve));
  let connected = 0;
  const onConnected = () => (connected += 1);
  // Even so, how many requests a worker holds at once is up to timing: the
  // pipelined pairs make it certain.
  const single = total - 2 * PIPELINED_PAIRS;
  const connections = single + PIPELINED_PAIRS;
  const pending = [
    ...Array.from({ length: single }, () => ctx.request('/count', { method: 'POST', timeoutMs: 8000, gate, onConnected })),
    ...Array.from({ length: PIPELINED_PAIRS }, () =>
      pipelined(ctx.port, '/count', { method: 'POST', count: 2, timeoutMs: 8000, signal: ctx.signal, gate, onConnected }),
    ),
  ];
  // Bounded: after 3 s the requests go out, handed over or not.
  let held = 0;
  const handed = await ctx.poll(() => connected === connections && (held = connectionsHeld(ctx.port, ctx.workers())) >= connections, {
    timeoutMs: 3000,
    intervalMs: 10,
  });
  ctx.log(
    `${connections} connections open${handed.ok ? ` and handed to the workers in ${handed.ms} ms` : ` (${held} with a worker after 3 s)`}; ` +
      `every POST /count sent at once (${PIPELINED_PAIRS} connections carry 2 pipelined)`,
  );
  let paused = null;
  if (holdPrimary && handed.ok) {
    const primary = ctx.primaryPid;
    ctx.onTeardown(() => trySignal(primary, 'SIGCONT'));
    trySignal(primary, 'SIGSTOP');
    const stoppedAt = performance.now();
    open();
    const read = await ctx.poll(() => unreadConnections(ctx.port) === 0, { timeoutMs: HOLD_LIMIT_MS, intervalMs: 5 });
    // Reading a request and asking happen in the same turn of the worker's loop; a margin for the slowest.
    await sleepFor(ASK_MARGIN_MS, ctx.signal);
    trySignal(primary, 'SIGCONT');
    paused = { ms: Math.round(performance.now() - stoppedAt), read: read.ok };
    ctx.log(
      `the primary was paused (SIGSTOP) for ${paused.ms} ms while the workers read ${read.ok ? 'every request' : `the requests (some still unread after ${HOLD_LIMIT_MS} ms)`}: ` +
        'every worker asked before any answer came',
    );
  } else open();
  const results = (await Promise.all(pending)).flat();
  const postCurl = ctx.curl('/count', { method: 'POST' });

  const unanswered = results.filter((r) => !r.ok);
  if (unanswered.length) {
    const timeouts = unanswered.filter((r) => r.code === 'TIMEOUT').length;
    const ofPairs = unanswered.filter((r) => r.pipelined).length;
    ctx.fail(`${unanswered.length} of ${total} concurrent POST /count got no answer.`, {
      expected: `${total} answers`,
      actual:
        `${unanswered.length} without an answer (${timeouts} hung until the ${8} s timeout), ` +
        `${ofPairs} of them pipelined (2 on one connection, so one worker held both at once): ${unanswered[0].error}`,
      explanation: causes.noAnswer?.explanation,
      reproduce: [`for i in $(seq 20); do ${postCurl} & done; wait`, pipelinedReproduce(ctx.port, '/count', { method: 'POST' })],
      hint: causes.noAnswer?.hint,
      showOutput: true,
    });
  }
  for (const r of results) ctx.expectJson(r);
  const notNumber = results.find((r) => !Number.isInteger(r.json.count));
  if (notNumber) {
    ctx.fail('POST /count answered without a whole-number "count".', {
      expected: '{ "pid": <pid>, "count": <the value after this increment> }',
      actual: notNumber.text,
      reproduce: postCurl,
    });
  }
  const stranger = results.find((r) => !workers.includes(r.pid));
  if (stranger) {
    ctx.fail(`POST /count was answered by pid ${stranger.pid}, which is not a worker.`, {
      expected: `one of the workers ${workers.join(', ')}`,
      actual: `pid ${stranger.pid}${stranger.pid === ctx.primaryPid ? ' (the primary)' : ''}`,
      hint: 'the workers serve every request; the primary only forks and keeps the state.',
    });
  }

  const byValue = new Map(); // count -> pids that answered it
  const byPid = new Map(); // pid -> counts it answered
  for (const r of results) {
    byValue.set(r.json.count, [...(byValue.get(r.json.count) ?? []), r.pid]);
    byPid.set(r.pid, [...(byPid.get(r.pid) ?? []), r.json.count]);
  }
  const perWorker = [...byPid].map(([pid, counts]) => `${pid}: ${summarize(counts)}`).join('; ');
  ctx.log(`answers per worker: ${[...byPid].map(([pid, counts]) => `${pid}: ${counts.length}`).join(', ')}`);

  const missing = [];
  for (let v = 1; v <= total; v++) if (!byValue.has(v)) missing.push(v);
  const repeated = [...byValue].filter(([, pids]) => pids.length > 1);
  if (missing.length === 0 && repeated.length === 0) {
    const silent = workers.filter((pid) => !byPid.has(pid));
    if (silent.length) {
      ctx.fail(`The ${total} increments came from ${byPid.size} of ${workers.length} workers.`, {
        expected: `answers from every worker (${workers.join(', ')})`,
        actual: `none from ${silent.join(', ')}`,
        explanation: 'Every worker listens on PORT and serves POST /count; the check needs all of them to take part.',
        showOutput: true,
      });
    }
    ctx.log(`${total} increments answered 1 to ${total}, each once, by ${byPid.size} workers`);
    return results;
  }

  const countsOnItsOwn =
    byPid.size > 1 &&
    [...byPid.values()].every((counts) => {
      const sorted = [...counts].sort((a, b) => a - b);
      return sorted.every((v, i) => v === i + 1);
    });
  if (countsOnItsOwn) {
    // Two programs answer this way: one that counts in each worker, and one
    // whose replies reach the wrong questions (ids that start at 1 in every
    // worker, a reply every worker takes): each worker's question k then gets
    // the first reply numbered k. Where the count lives tells them apart.
    const { results: reads } = await ctx.reachWorkers('/count', { count: workers.length, maxRequests: 40 });
    const totals = [...new Map(reads.filter((r) => r.ok && Number.isInteger(r.json?.count)).map((r) => [r.pid, r.json.count]))];
    if (causes.mismatched && totals.length > 1 && totals.every(([, c]) => c === total)) {
      ctx.fail(`Every worker answered 1, 2, 3... as if it counted by itself, yet GET /count answers ${total} from every worker: answers went to the wrong questions.`, {
        expected: `the values 1 to ${total}, each once, whichever worker answers`,
        actual: `per worker: ${perWorker}; then GET /count: ${totals.map(([pid, c]) => `${pid}: ${c}`).join(', ')}`,
        explanation: causes.mismatched.explanation,
        reproduce: [`for i in $(seq 50); do ${postCurl} & done; wait`],
        hint: causes.mismatched.hint,
      });
    }
    ctx.fail('Each worker keeps its own count: every worker counted 1, 2, 3... by itself.', {
      expected: `the values 1 to ${total}, each once, whichever worker answers`,
      actual: `per worker: ${perWorker}`,
      explanation: causes.perWorker.explanation,
      reproduce: [`for i in $(seq 6); do ${postCurl}; echo; done   # the same values come back from different pids`],
      hint: causes.perWorker.hint,
    });
  }
  if (repeated.length) {
    const samePid = repeated.some(([, pids]) => new Set(pids).size < pids.length);
    const crossPid = repeated.some(([, pids]) => new Set(pids).size > 1);
    const cause = causes.duplicates({ samePid, crossPid });
    const examples = [...repeated]
      .sort((a, b) => b[1].length - a[1].length)
      .slice(0, 3)
      .map(([v, pids]) => `count ${v} answered ${pids.length} times (${tally(pids)})`)
      .join('; ');
    ctx.fail(`${repeated.length} values were answered more than once, and ${missing.length} of 1 to ${total} never.`, {
      expected: `the values 1 to ${total}, each exactly once`,
      actual: `${examples}${repeated.length > 3 ? '; ...' : ''}`,
      explanation: cause.explanation,
      reproduce: `for i in $(seq 50); do ${postCurl} & done; wait`,
      hint: cause.hint,
    });
  }
  const values = [...byValue.keys()].sort((a, b) => a - b);
  ctx.fail(`The ${total} increments answered ${summarize(values)}, not 1 to ${total}.`, {
    expected: `the values 1 to ${total}: each answer is the count after its own increment`,
    actual: `missing ${summarize(missing)}`,
    explanation: 'Answer the value after the increment (the first POST on a fresh start answers 1), and start from 0.',
    reproduce: postCurl,
  });
}

/**
 * GET /count from every current worker answers `expected`. `cause` explains a
 * worker that answers another value.
 */
export async function expectCountEverywhere(ctx, expected, { cause, when = '' } = {}) {
  const workers = ctx.workers();
  const { pids, results } = await ctx.reachWorkers('/count', { count: workers.length, maxRequests: 60, concurrency: 3 });
  for (const r of results) {
    ctx.expectJson(r);
    if (r.json.count !== expected) {
      ctx.fail(`GET /count answered ${JSON.stringify(r.json.count)} from worker ${r.pid}${when}.`, {
        expected: `"count": ${expected} from every worker`,
        actual: r.text,
        explanation: cause?.explanation,
        reproduce: `for i in $(seq 6); do ${ctx.curl('/count')}; echo; done`,
        hint: cause?.hint,
      });
    }
  }
  const silent = workers.filter((pid) => !pids.has(pid));
  if (silent.length) {
    ctx.fail(`Worker ${silent.join(', ')} never answered GET /count in 60 requests.`, {
      expected: `answers from every worker (${workers.join(', ')})`,
      actual: `answers from ${[...pids.keys()].join(', ')}`,
      showOutput: true,
    });
  }
  ctx.log(`GET /count answered ${expected} from every worker (${[...pids.keys()].join(', ')})${when}`);
}

/** "by 101 x3, 102 x1": who answered a repeated value. */
function tally(pids) {
  const counts = new Map();
  for (const pid of pids) counts.set(pid, (counts.get(pid) ?? 0) + 1);
  return `by ${[...counts].map(([pid, n]) => `${pid} x${n}`).join(', ')}`;
}

/** "1-5, 7, 9-12": a sorted summary of whole numbers, cut when long. */
export function summarize(numbers) {
  const sorted = [...new Set(numbers)].sort((a, b) => a - b);
  const ranges = [];
  for (const n of sorted) {
    const last = ranges.at(-1);
    if (last && n === last[1] + 1) last[1] = n;
    else ranges.push([n, n]);
  }
  const parts = ranges.map(([a, b]) => (a === b ? `${a}` : `${a}-${b}`));
  return parts.length > 8 ? `${parts.slice(0, 8).join(', ')}, ...` : parts.join(', ') || 'none';
}

/**
 * The counter under chaos (the capstone): increments sent while workers die
 * cannot answer exactly 1 to n (one in flight to a killed worker may or may
 * not have counted), so the rule is the one that holds whatever dies: every
 * acknowledged increment answered a value no other one did, the count grew
 * by at least the acknowledged ones and by no more than were sent, and every
 * worker then reads the same count.
 * @param {{ sent: number, before: number, values: number[], finalCounts: number[] }} o
 *   values: the counts the acknowledged increments answered; finalCounts: one GET /count per worker afterwards
 * @returns {{ sent, before, acknowledged, after, duplicates, consistent, finalCounts, lost }}
 */
export function judgeIncrements({ sent, before, values, finalCounts }) {
  const after = finalCounts.length ? Math.max(...finalCounts) : null;
  return {
    sent,
    before,
    acknowledged: values.length,
    after,
    duplicates: values.length - new Set(values).size,
    consistent: new Set(finalCounts).size === 1,
    finalCounts,
    lost: Math.max(0, values.length - ((after ?? 0) - before)),
  };
}

/** The failure of judgeIncrements' result, or null when it holds. */
export function incrementsFailure(i) {
  if (i.lost === 0 && i.duplicates === 0 && i.consistent && i.after - i.before <= i.sent) return null;
  let message;
  if (!i.consistent) message = `The workers answered different counts after the increments: ${i.finalCounts.join(', ')}.`;
  else if (i.duplicates) message = `${i.duplicates} POST /count answers repeated a value another one had.`;
  else if (i.lost) message = `${i.lost} acknowledged increments are missing from the count.`;
  else message = `The count grew by ${i.after - i.before}, more than the ${i.sent} increments sent.`;
  return {
    message,
    expected: `each acknowledged POST /count answered a different value, and GET /count from every worker then answers ${i.before} + the number of increments applied`,
    actual: `${i.acknowledged} acknowledged, count ${i.before} -> ${i.after}, ${i.duplicates} duplicates`,
    explanation:
      'The counter lives in the primary, which survives every worker death: a worker asks it over IPC with an id per request and answers with the value the primary gave for that id (the shared-state lesson).',
  };
}
