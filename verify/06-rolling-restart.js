// Lesson 6 (rolling-restart): SIGUSR2 to the primary replaces every worker
// while continuous fresh-connection load runs: zero failed requests, never
// fewer than 3 workers alive (sampled every 10 ms), a /slow?ms=1500 started
// before the signal completes, and it ends with exactly 3 new workers under
// the same primary within 10 s. Then a second SIGUSR2 during a restart must
// not break anything (ignored or queued).
import { countWorkers, expectPrimaryAlive } from './shared/workers.js';
import { watchWorkers } from './shared/sampler.js';
import { startInFlight } from './shared/inflight.js';
import { failed, summarizeFailures } from '../lib/harness/load.js';
import { describeResult } from '../lib/harness/http.js';

const WORKERS = 3;
const SLOW = '/slow?ms=1500';
const RESTART_LIMIT_MS = 10000;
// A restart has ended when the worker set has not changed for this long:
// a queued second restart starts its first fork at once, well within it.
const SETTLED_MS = 200;

// Capacity = workers that can serve: the old ones while alive, a new one
// from its first answer. A dip is a finding when it lasts at least 20 ms and
// covers at least 60% of the start-up of the replacement that ends it (see
// shared/sampler.js): a replacement disconnected-for spends all of its
// start-up in the dip, a correct one only the delay of its first answer.
// And at least 4 requests sent during the dip must have gone to the other
// workers before the replacement got its first: round robin hands a listening
// replacement one of the next 3 connections, so a starved verifier's late
// look at a correct restart shows 2 at most (0 in every run measured under
// CPU hogs), while a replacement still loading misses every request (7 to 55).
const CAPACITY = { toleranceMs: 20, minShare: 0.6, minMisses: 4 };

const ms = (from, to) => Math.round(to - from);

/**
 * Waits until exactly n workers are alive, none of them in `old`, and the set
 * has not changed for SETTLED_MS; bounded by `deadline` (performance.now()).
 * Returns { ok, pids, at } (at: when that final set was first seen). Gives up
 * at once when more than 2n workers run: a correct restart has at most the
 * n new ones, the one being started and a few old ones still finishing
 * requests; more means restarts or respawns pile up (and stopping here says
 * so before the runner's fork watchdog would end the program).
 */
async function restartFinished(ctx, n, old, deadline) {
  let key = '';
  let since = performance.now();
  for (;;) {
    if (ctx.program.exited) return { ok: false, pids: [], at: null };
    const pids = ctx.workers();
    const now = performance.now();
    const k = pids.join(',');
    if (k !== key) {
      key = k;
      since = now;
    }
    if (pids.length > 2 * n) return { ok: false, pids, at: null, tooMany: true };
    const done = pids.length === n && pids.every((pid) => !old.includes(pid));
    if (done && now - since >= SETTLED_MS) return { ok: true, pids, at: since };
    if (now > deadline) return { ok: false, pids, at: null };
    await new Promise((r) => setTimeout(r, 20));
  }
}

/** The explanation of failed requests, from what the process table showed. */
function failureCause(ctx, watch) {
  if (ctx.program.exited && ctx.program.exit.signal === 'SIGUSR2') {
    return {
      explanation: 'The primary has no SIGUSR2 handler, and the default action of SIGUSR2 ends the process: the primary died and every worker with it.',
      hint: "process.on('SIGUSR2', rollingRestart) in the primary.",
    };
  }
  const lowest = watch.lowest();
  if (lowest && lowest.count === 0) {
    return {
      explanation: 'At one moment no worker was alive: the old workers were all stopped before the new ones listened, so connections were refused or reset.',
      hint: 'replace one worker at a time: fork the replacement, wait for its \'listening\' event, then worker.disconnect() the old one; never kill them all first.',
    };
  }
  return {
    explanation:
      'Requests died with the workers that served them. worker.kill() or process.kill ends a worker mid-request; worker.disconnect() lets it finish what it has and take nothing new.',
    hint: 'retire an old worker with worker.disconnect() (and a kill only after a time limit), after its replacement listens.',
  };
}

/** Fails when the load saw any failed request. */
function expectNoFailures(ctx, results, watch, what) {
  const bad = results.filter(failed);
  ctx.log(`${results.length} requests over fresh connections during ${what}, ${bad.length} failed`);
  if (!bad.length) return;
  const { explanation, hint } = failureCause(ctx, watch);
  ctx.fail(`${bad.length} of ${results.length} requests failed during ${what}.`, {
    expected: 'every request answered with status 200 while the workers are replaced',
    actual: `${summarizeFailures(results)}; first: ${describeResult(bad[0])}`,
    explanation,
    reproduce: [`while true; do ${ctx.curl('/')} || echo FAILED; done &`, `kill -USR2 ${ctx.primaryPid}`],
    hint,
    showOutput: true,
  });
}

/** Fails when the worker count dipped below WORKERS at any sample. */
function expectCapacity(ctx, watch, signalAt, results, what = 'the restart') {
  const lowest = watch.lowest();
  const brief = watch.dips.map(
    (d) => `${d.ms} ms${d.startupMs ? ` of a ${d.startupMs} ms start-up` : ''}${d.misses !== undefined ? ` (${d.misses} requests to the others first)` : ''}`,
  );
  ctx.log(
    `${watch.samples} samples of the process table, at most ${Math.round(watch.maxGapMs)} ms apart` +
      (brief.length ? `; gaps before a replacement's first answer: ${brief.join(', ')}` : ''),
  );
  if (!lowest) return;
  const lasted = lowest.ms;
  const noneFailed = results && !results.some(failed);
  ctx.fail(`Only ${lowest.count} worker${lowest.count === 1 ? '' : 's'} could serve for about ${lasted} ms during ${what}, WORKERS=${WORKERS}.`, {
    expected: `at least ${WORKERS} workers able to serve at every moment: the replacement listens before the old worker is disconnected`,
    actual:
      `${lowest.count} serving (${lowest.pids.join(', ') || 'none'}) from ${ms(signalAt, lowest.from)} ms after SIGUSR2` +
      (lowest.starting.length ? `; ${lowest.starting.join(', ')} forked but not listening yet` : '') +
      (lowest.startupMs ? ` (the dip covered ${lasted} ms of its replacement's ${lowest.startupMs} ms start-up)` : '') +
      (lowest.misses ? `; the ${lowest.misses} requests sent meanwhile went to the other workers or failed` : ''),
    explanation:
      (noneFailed ? 'No request failed: the remaining workers took the connections, and at this light load they kept up. ' : '') +
      `But for that moment the cluster ran at ${lowest.count}/${WORKERS} of its capacity: under real traffic the remaining workers queue or shed the load. An old worker was disconnected before its replacement was listening (a forked worker needs a moment to load and listen).`,
    reproduce: [`kill -USR2 ${ctx.primaryPid}`, `watch -n 0.1 pgrep -P ${ctx.primaryPid}`],
    hint: "fork the replacement first, wait for its 'listening' event, and only then worker.disconnect() the old one.",
  });
}

export default {
  env: { WORKERS: String(WORKERS) },
  steps: [
    {
      id: 'worker-count',
      title: `the primary has exactly ${WORKERS} workers`,
      async run(ctx) {
        ctx.data.primaryPid = ctx.primaryPid;
        ctx.data.old = await countWorkers(ctx, WORKERS, { wrongHint: 'fork Number(process.env.WORKERS) workers (lesson 2).' });
      },
    },
    {
      id: 'no-failed-requests',
      title: 'SIGUSR2 under continuous load: zero failed requests',
      timeoutMs: RESTART_LIMIT_MS + 5000,
      async run(ctx) {
        const old = ctx.data.old;
        const load = ctx.startLoad({ concurrency: 2, timeoutMs: 5000 });
        const watch = watchWorkers(ctx, { min: WORKERS, serving: load, ...CAPACITY });
        const slow = await startInFlight(ctx, SLOW, { timeoutMs: 8000 });
        ctx.log(`load running; ${SLOW} in flight`);
        ctx.signalPrimary('SIGUSR2');
        const signalAt = performance.now();
        const end = await restartFinished(ctx, WORKERS, old, signalAt + RESTART_LIMIT_MS);
        const results = await load.stop();
        watch.stop();
        const slowResult = await slow.result;
        Object.assign(ctx.data, { watch, signalAt, end, results, slowResult });
        if (end.ok) ctx.log(`restart finished ${ms(signalAt, end.at)} ms after SIGUSR2: workers ${end.pids.join(', ')}`);
        expectNoFailures(ctx, results, watch, 'the restart');
      },
    },
    {
      id: 'capacity',
      title: `at every moment at least ${WORKERS} workers could serve`,
      async run(ctx) {
        const { watch, signalAt, results } = ctx.data;
        expectCapacity(ctx, watch, signalAt, results);
        ctx.log(`never fewer than ${WORKERS} workers; ${watch.newPids().length} new workers appeared`);
      },
    },
    {
      id: 'slow-completes',
      title: `a ${SLOW} request started before SIGUSR2 completes with 200`,
      async run(ctx) {
        const r = ctx.data.slowResult;
        if (r.ok && r.status === 200 && r.pid !== undefined) {
          ctx.log(`${SLOW} completed with 200 from worker ${r.pid}`);
          return;
        }
        ctx.fail(`The ${SLOW} request that was in flight ${r.ok ? `got status ${r.status}` : 'was dropped'} during the restart.`, {
          expected: 'status 200: the old worker finishes its requests before it exits',
          actual: describeResult(r),
          explanation:
            'An old worker must be retired gracefully: worker.disconnect() closes its server and lets the requests it has finish. worker.kill(), or a kill timer shorter than your slowest request, cuts them off.',
          reproduce: [`${ctx.curl(SLOW)} &`, `kill -USR2 ${ctx.primaryPid}`],
          hint: 'worker.disconnect(), then kill only after a generous limit (10 s).',
          showOutput: true,
        });
      },
    },
    {
      id: 'ends-clean',
      title: `it ends within ${RESTART_LIMIT_MS / 1000} s with exactly ${WORKERS} new workers and the same primary`,
      async run(ctx) {
        const { end, old, primaryPid } = ctx.data;
        expectPrimaryAlive(ctx, 'during the restart');
        if (ctx.primaryPid !== primaryPid) ctx.fail('The primary changed.', { expected: `pid ${primaryPid}`, actual: `pid ${ctx.primaryPid}` });
        if (!end.ok) {
          const now = end.tooMany ? end.pids : ctx.workers();
          const stillOld = end.tooMany ? [] : now.filter((pid) => old.includes(pid));
          const tooMany = now.length > WORKERS;
          ctx.fail(
            stillOld.length
              ? `${RESTART_LIMIT_MS / 1000} s after SIGUSR2, ${stillOld.length} old worker${stillOld.length === 1 ? ' is' : 's are'} still running.`
              : `${end.tooMany ? 'During the restart' : `${RESTART_LIMIT_MS / 1000} s after SIGUSR2`} there ${now.length === 1 ? 'is 1 worker' : `are ${now.length} workers`}, WORKERS=${WORKERS}.`,
            {
              expected: `exactly ${WORKERS} workers, none of the old ones (${old.join(', ')})`,
              actual: `${now.length} workers: ${now.map((pid) => (old.includes(pid) ? `${pid} (old)` : String(pid))).join(', ') || 'none'}`,
              explanation: stillOld.length
                ? now.length === 0
                  ? 'No worker is left.'
                  : 'The replacements were forked but the old workers never retired: each must be disconnected once its replacement listens.'
                : tooMany
                  ? "More workers than WORKERS: the retired workers were replaced again. The 'exit' handler of lesson 3 forks for every exit, the ones you caused on purpose too."
                  : 'The restart did not end with a full set of new workers.',
              reproduce: [`kill -USR2 ${primaryPid}`, `pgrep -P ${primaryPid}`],
              hint: stillOld.length
                ? "after the replacement's 'listening' event, call oldWorker.disconnect()."
                : "in cluster.on('exit'), do not fork when worker.exitedAfterDisconnect is true: that worker was retired, and its replacement already runs.",
              showOutput: true,
            },
          );
        }
        ctx.log(`primary ${primaryPid} unchanged; workers ${end.pids.join(', ')}, none of ${old.join(', ')}`);
      },
    },
    {
      id: 'second-signal',
      title: 'a second SIGUSR2 during a restart breaks nothing (ignored or queued)',
      timeoutMs: 2 * RESTART_LIMIT_MS + 5000,
      async run(ctx) {
        const before = ctx.workers();
        // One loop is enough here: this round is about the restart's logic;
        // step no-failed-requests already put the heavier load through one.
        const load = ctx.startLoad({ concurrency: 1, timeoutMs: 5000 });
        const watch = watchWorkers(ctx, { min: WORKERS, serving: load, ...CAPACITY });
        ctx.signalPrimary('SIGUSR2');
        const signalAt = performance.now();
        // The second signal comes once the restart is visibly under way.
        const started = await ctx.poll(() => watch.newPids().length > 0 || ctx.program.exited, { timeoutMs: 3000, intervalMs: 5 });
        if (started.ok && !ctx.program.exited) ctx.signalPrimary('SIGUSR2');
        // Queued: two restarts in a row, so twice the time is allowed.
        const end = await restartFinished(ctx, WORKERS, before, signalAt + 2 * RESTART_LIMIT_MS);
        const results = await load.stop();
        watch.stop();
        expectPrimaryAlive(ctx, 'after a second SIGUSR2');
        if (!started.ok) {
          ctx.fail('SIGUSR2 started no restart this time.', {
            expected: 'a second restart after the first has finished: new workers appear',
            actual: `no new worker within 3 s; workers ${ctx.workers().join(', ')}`,
            explanation: 'A flag that marks a restart as running must be cleared when it ends, or every later SIGUSR2 is ignored.',
            hint: 'set restarting = false once the last replacement listens.',
          });
        }
        expectNoFailures(ctx, results, watch, 'a restart with a second SIGUSR2');
        expectCapacity(ctx, watch, signalAt, results, 'a restart with a second SIGUSR2');
        if (!end.ok) {
          const now = end.tooMany ? end.pids : ctx.workers();
          ctx.fail(`After a second SIGUSR2 during the restart, the workers did not settle at exactly ${WORKERS} new ones.`, {
            expected: `exactly ${WORKERS} workers, none of ${before.join(', ')}`,
            actual: `${now.length} workers: ${now.map((pid) => (before.includes(pid) ? `${pid} (old)` : String(pid))).join(', ')}`,
            explanation:
              'Two restarts ran at once: each forked replacements and retired workers from its own list, so the count went wrong. Either ignore SIGUSR2 while a restart runs, or queue it and start the next restart when this one ends. If yours already does, the second restart probably took a worker the first one had retired (it stays alive while it drains): skip workers whose exitedAfterDisconnect is true.',
            reproduce: [`kill -USR2 ${ctx.primaryPid}; sleep 0.1; kill -USR2 ${ctx.primaryPid}`, `pgrep -P ${ctx.primaryPid}`],
            hint: 'let restarting = false; in the SIGUSR2 handler: if (restarting) return; restarting = true; ... restarting = false at the end.',
            showOutput: true,
          });
        }
        ctx.log(`settled ${ms(signalAt, end.at)} ms after the first SIGUSR2 with workers ${end.pids.join(', ')}`);
      },
    },
  ],
};
