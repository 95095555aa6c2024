// The capstone lesson (capstone): the whole course in one program, under continuous
// load over fresh connections, while a schedule drawn from a seed SIGKILLs
// workers, crashes one, hangs one, updates the config, rolls a restart, sends
// 200 concurrent increments, starts a crash loop (POISON_FILE) and finally
// sends SIGTERM. It passes when no request fails except those in flight to a
// worker at the moment it was killed or hung, no increment is lost, the
// crash loop stops within 10 s and the shutdown is clean. The chaos step
// keeps a score card (step log, and `scorecard` on its JSON report entry).
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request, describeResult } from '../lib/harness/http.js';
import { isAlive } from '../lib/harness/processes.js';
import { failed } from '../lib/harness/load.js';
import { StepFailure } from '../lib/harness/failure.js';
import { sleepFor } from '../lib/harness/context.js';
import { countWorkers, crashOneWorker, expectPrimaryAlive, expectSurvivedSigusr2, waitForReplacement } from './shared/workers.js';
import { startFreshKeepAliveInFlight } from './shared/fresh-inflight.js';
import { holdNewWorkersAtOnline, HOLD_MS } from './shared/throttle.js';
import { startedTogether, startedTogetherFailure } from './shared/one-at-a-time.js';
import { expectHangUnanswered, hungNotKilledFailure } from './shared/hang.js';
import { acceptDips, capacityFailure, DIP_TOLERANCE_MS } from './shared/capacity.js';
import { classifyKeepAlive, lingeringWorkers, lingeringFailure, describeKeepAliveFailures, summarizeKeepAlive, cutOnShutdownFailure } from './shared/drain.js';
import { CONVERGE_MS, REPLACEMENT_EXPLANATION, answersConfig, show, staleAfterUpdate } from './shared/config.js';
import { judgeIncrements, incrementsFailure } from './shared/counter.js';
import { SURVIVOR_GRACE_MS } from './shared/shutdown.js';
import { watchStopsAccepting, stillAcceptingFailure } from './shared/stops-accepting.js';
import { startLateSenders } from './shared/late-senders.js';
import { startSlowStream, slowRequestsNeed, cutInFlight, streamCutFailure } from './shared/slow-stream.js';
import { crashLoopAndRecovery, expectCrashLoopContained } from './shared/crash-loop.js';
import { startKeepAliveClients } from '../lib/harness/keepalive.js';
import {
  causes,
  causesText,
  classify,
  excusedBy,
  freshSeed,
  longestSilence,
  replayCommand,
  scheduleFor,
  scorecardLines,
} from './shared/chaos.js';

const WORKERS = 3;
const HEARTBEAT_TIMEOUT = 1000;
// One path per verifier process: the file exists only during the crash-loop
// event, and the verifier removes it whatever happens.
const POISON_FILE = join(tmpdir(), `cluster-workshop-poison-${process.pid}-${randomBytes(4).toString('hex')}`);
const INCREMENTS = 200;
const REPLACE_WITHIN_MS = 3000;
const ROLLING_WITHIN_MS = 10_000;
// During the rolling restart, a /slow?ms=1500 every 40 ms on a new connection
// until the last replacement is forked, as in lesson rolling-restart
// (shared/slow-stream.js): every worker retired meanwhile has slow requests
// in flight with over 1 s to run, so a drain that ends them early (a kill 1 s
// after disconnect(), closeAllConnections() soon after close()) cuts some
// every run. The 10 s grow by what they still needed (slowRequestsNeed).
const STREAM_SLOW_MS = 1500;
const STREAM_PATH = `/slow?ms=${STREAM_SLOW_MS}`;
const STREAM_INTERVAL_MS = 40;
// A victim must have been serving this long, so that its death never counts
// toward the crash loop ("died within a second of starting").
const MATURE_MS = 1100;
// Deaths of serving workers within 10 s before the crash loop (see runChaos).
const MATURE_DEATHS = 6;
const SHUTDOWN_WITHIN_MS = 5000;
const SHUTDOWN_TIMEOUT = 5000;
const KEEP_ALIVE_CLIENTS = 4;
// In flight at SIGTERM: long enough that a worker draining without closing
// its server keeps the port open well past STOP_ACCEPTING_MS, short enough
// for the exit within SHUTDOWN_WITHIN_MS.
const SLOW_MS = 2000;
// A program that calls worker.disconnect() refuses new connections within
// tens of milliseconds of the signal (verify/shared/stops-accepting.js).
const STOP_ACCEPTING_MS = 1000;
const LOAD_TIMEOUT_MS = 4000;

const now = () => performance.now();

// The chaos is its schedule (verify/shared/chaos.js: a seeded order of these
// kinds, then SIGTERM) and this table: each event injects a fault, or starts
// a job, and checks it with the shared module of the lesson that teaches it.
// settle: back to WORKERS answering workers before the next event. Judged
// after the chaos, in steps of their own: the requests (no-failed-requests),
// the increments (no-lost-increments), the config (config-everywhere), the
// crash loop (crash-loop-contained) and the shutdown (shutdown-clean, the
// drain rules of shared/drain.js, as in graceful-shutdown).
const EVENTS = {
  // respawn: SIGKILL a serving worker, see it replaced (shared/workers.js).
  kill: { inject: killAndSeeReplaced, settle: true },
  // respawn: GET /crash, see its worker die (crashOneWorker) and be replaced (shared/workers.js).
  crash: { inject: crashAndSeeReplaced, settle: true },
  // health-check: GET /hang, see the hung worker killed (shared/hang.js) and replaced.
  hang: { inject: hangAndSeeKilled, settle: true },
  // broadcast: POST /config; every worker answers it from CONVERGE_MS on (shared/config.js).
  config: { inject: postConfig, settle: false },
  // rolling-restart: SIGUSR2, replacements held at 'online' (shared/throttle.js), no capacity dip (shared/capacity.js).
  'rolling-restart': { inject: rollingRestart, settle: true },
  // shared-state: INCREMENTS concurrent POST /count, judged by shared/counter.js.
  increments: { inject: startIncrements, settle: false },
  // crash-loop containment: POISON_FILE, a kill, the primary stops forking; SIGUSR2 recovers (shared/crash-loop.js).
  'crash-loop': { inject: (chaos, event) => crashLoopAndRecovery(chaos, event, { poisonFile: POISON_FILE, workers: WORKERS }), settle: false },
};

export default {
  env: { WORKERS: String(WORKERS), HEARTBEAT_TIMEOUT: String(HEARTBEAT_TIMEOUT), SHUTDOWN_TIMEOUT: String(SHUTDOWN_TIMEOUT), POISON_FILE },
  steps: [
    {
      id: 'worker-count',
      title: `the primary has exactly ${WORKERS} workers`,
      async run(ctx) {
        ctx.data.seed = ctx.options?.seed ?? freshSeed();
        ctx.data.primaryPid = ctx.primaryPid;
        ctx.log(`seed ${ctx.data.seed}: replay this run with ${replayCommand(ctx)}`);
        await countWorkers(ctx, WORKERS, { wrongHint: 'fork Number(process.env.WORKERS) workers (the fork lesson).' });
      },
    },
    {
      id: 'routes',
      title: 'GET /config, GET /count, GET /slow answer as in the broadcast, shared-state and graceful-shutdown lessons; a bad config gets 400',
      async run(ctx) {
        const config = await ctx.get('/config');
        if (typeof config.json.config !== 'object' || config.json.config === null) {
          ctx.fail('GET /config did not answer { "pid", "config" } with an object.', {
            expected: '{ "pid": 1234, "config": {} } before any update',
            actual: config.text,
            reproduce: ctx.curl('/config'),
          });
        }
        const count = await ctx.get('/count');
        if (!Number.isInteger(count.json.count)) {
          ctx.fail('GET /count did not answer { "pid", "count" } with a whole number.', {
            expected: '{ "pid": 1234, "count": 0 }',
            actual: count.text,
            reproduce: ctx.curl('/count'),
          });
        }
        const slow = await ctx.get('/slow?ms=200', { timeoutMs: 3000 });
        if (slow.ms < 180) {
          ctx.fail(`GET /slow?ms=200 answered after ${slow.ms} ms.`, {
            expected: 'an answer after about 200 ms (a timer)',
            actual: `${slow.ms} ms`,
            reproduce: ctx.curl('/slow?ms=200'),
          });
        }
        const bad = await ctx.request('/config', { method: 'POST', body: '[1,2]', timeoutMs: 3000 });
        if (!bad.ok || bad.status !== 400) {
          ctx.fail('POST /config with a JSON array did not get status 400.', {
            expected: 'status 400: the config must be a JSON object',
            actual: bad.ok ? `status ${bad.status}` : bad.error,
            reproduce: `curl -s -X POST -H 'content-type: application/json' -d '[1,2]' ${ctx.curl('/config').split(' ').pop()}`,
          });
        }
        ctx.log(`GET /config -> ${config.text}; GET /count -> ${count.text}; /slow ${slow.ms} ms; bad config -> 400`);
      },
    },
    {
      id: 'chaos',
      title: 'chaos under load, each fault once the cluster has recovered from the last: kills, a crash, a hang, a config update, a rolling restart, increments, a crash loop, SIGTERM',
      timeoutMs: 90_000,
      async run(ctx) {
        try {
          await runChaos(ctx);
        } catch (err) {
          // Whatever stopped the chaos, the learner gets the score card so
          // far and the command that replays the same schedule.
          if (ctx.data.card) {
            for (const line of scorecardLines(ctx.data.card)) ctx.log(line);
            ctx.attach('scorecard', ctx.data.card);
          }
          // Once: a failure of the chaos may already name its seed and the replay.
          if (err instanceof StepFailure) {
            if (!err.message.includes(`(seed ${ctx.data.seed})`)) err.message = `${err.message} (seed ${ctx.data.seed})`;
            if (!err.explanation?.includes(replayCommand(ctx))) err.explanation = [err.explanation, `Replay this exact schedule: ${replayCommand(ctx)}`].filter(Boolean).join('\n');
          }
          throw err;
        } finally {
          rmSync(POISON_FILE, { force: true });
        }
      },
    },
    {
      id: 'no-failed-requests',
      title: 'no request failed except those in flight to a worker when it was killed or hung',
      async run(ctx) {
        const { card, unexcused, timeline, t0 } = ctx.data;
        if (unexcused.length === 0) return ctx.log(`${card.requests.succeeded} of ${card.requests.sent} answered; ${card.requests.excused} excused`);
        const shown = unexcused.slice(0, 5).map((r) => describeFailure(r, timeline, t0));
        ctx.fail(`${unexcused.length} of ${card.requests.sent} requests failed outside the moments a worker was killed or hung (seed ${card.seed}).`, {
          expected: 'every request answered 200, except those in flight to a worker at the moment it died',
          actual: `${causesText(card.requests.failedByCause)}:\n${shown.join('\n')}`,
          explanation:
            'Look at the event just before each failure and at how it failed. Possible causes: ' +
            'refused during a rolling restart: the old workers left before the new ones listened (after the crash loop\'s SIGUSR2: or the primary forked none); ' +
            'a new connection reset during a rolling restart: a retiring worker ended connections the primary had just handed it, before it read their request (a drain library that destroys or ends every socket with no request yet: http-terminator\'s terminate(), stoppable\'s stop(); or server.closeAllConnections() or a kill before the time limit); ' +
            `reset or status 500 on POST /count: a worker answered before the primary did, or lost its reply. Replay the same schedule: ${replayCommand(ctx)}`,
          showOutput: true,
        });
      },
    },
    {
      id: 'no-lost-increments',
      title: `${INCREMENTS} concurrent POST /count: no increment lost, none counted twice`,
      async run(ctx) {
        const i = ctx.data.card.increments;
        ctx.log(`${i.acknowledged} acknowledged, count ${i.before} -> ${i.after}, ${i.duplicates} duplicate values, final counts seen ${i.finalCounts.join(', ')}`);
        const f = incrementsFailure(i);
        if (f) ctx.fail(`${f.message} (seed ${ctx.data.seed})`, { ...f, explanation: `${f.explanation} Replay the same schedule: ${replayCommand(ctx)}` });
      },
    },
    {
      id: 'config-everywhere',
      title: 'after POST /config, every worker (replacements included) answers the new config',
      async run(ctx) {
        const c = ctx.data.configCheck;
        ctx.log(`${c.checked} GET /config answers from ${CONVERGE_MS / 1000} s after the update on; ${c.stale.length} stale; final: ${c.finalText}`);
        if (c.stale.length === 0 && c.finalOk) return;
        const r = c.stale[0];
        ctx.fail(`A worker answered an old config after the update had been acknowledged (seed ${ctx.data.seed}).`, {
          expected: `config ${JSON.stringify(c.posted)} from every worker, at the latest ${CONVERGE_MS / 1000} s after the POST`,
          actual: r ? `pid ${r.pid} answered ${show(r.json?.config)} at t=${((r.end - ctx.data.t0) / 1000).toFixed(2)} s` : c.finalText,
          explanation: `${REPLACEMENT_EXPLANATION} Replay the same schedule: ${replayCommand(ctx)}`,
        });
      },
    },
    {
      id: 'crash-loop-contained',
      title: 'with POISON_FILE present, the primary stops respawning within 10 s, and forks again after the file is gone and SIGUSR2',
      async run(ctx) {
        expectCrashLoopContained(ctx, ctx.data.card.crashLoop, { workers: WORKERS });
      },
    },
    {
      id: 'shutdown-clean',
      title: `SIGTERM: new connections refused within ${STOP_ACCEPTING_MS / 1000} s, the /slow request in flight completes, nothing is respawned, the primary exits 0 within ${SHUTDOWN_WITHIN_MS / 1000} s, no worker left`,
      async run(ctx) {
        const s = ctx.data.card.shutdown;
        const replay = `Replay the same schedule: ${replayCommand(ctx)}`;
        if (!s) ctx.fail('The chaos stopped before SIGTERM.');
        if (s.slow !== 'answered 200') {
          ctx.fail(`The GET /slow?ms=${SLOW_MS} in flight at SIGTERM did not complete (${s.slow}).`, {
            expected: 'status 200: a worker finishes its in-flight requests before it exits',
            actual: s.slow,
            explanation:
              'The verifier sent SIGTERM to the whole process group, as systemd does. Possible causes: the workers have no SIGTERM handler of their own, so the signal killed them at once (ignoring SIGINT alone is not enough); or the primary killed them (a kill on the signal, or a heartbeat check that still applies to draining workers whose heartbeats stopped), exited, or ended their connections (server.closeAllConnections()) instead of disconnecting them and letting the request finish (the graceful-shutdown lesson). ' +
              replay,
            hint: "in the workers, process.on('SIGTERM', () => {}) and process.on('SIGINT', () => {}); in the primary, worker.disconnect() for every worker.",
            showOutput: true,
          });
        }
        if (!s.accepting.refused) {
          const f = stillAcceptingFailure({ port: ctx.port, withinMs: STOP_ACCEPTING_MS, accepted: s.accepting.accepted, signal: 'SIGTERM to the process group', inFlight: `GET /slow?ms=${SLOW_MS}` });
          ctx.fail(f.message, { ...f, explanation: `${f.explanation} ${replay}`, showOutput: true });
        }
        if (s.lingering.length) {
          const f = lingeringFailure(s.lingering[0], { what: 'SIGTERM', all: s.lingering });
          ctx.fail(f.message, { ...f, explanation: `${f.explanation} ${replay}`, showOutput: true });
        }
        if (s.keepAliveProblems) {
          const f = cutOnShutdownFailure(s.keepAliveProblems);
          ctx.fail(f.message, { ...f, explanation: `${f.explanation} ${replay}`, showOutput: true });
        }
        if (s.respawned.length) {
          ctx.fail(`The primary forked ${s.respawned.join(', ')} during the shutdown.`, {
            expected: 'no new worker after SIGTERM',
            actual: `new workers ${s.respawned.join(', ')}`,
            explanation: `The workers that exit while shutting down are not deaths to repair: set a flag on SIGTERM and do not fork in 'exit' once it is set. ${replay}`,
            showOutput: true,
          });
        }
        if (!s.exit || s.ms > SHUTDOWN_WITHIN_MS) {
          ctx.fail(s.exit ? `The primary took ${(s.ms / 1000).toFixed(1)} s to exit.` : `The primary was still running ${(s.ms / 1000).toFixed(1)} s after SIGTERM.`, {
            expected: `the primary exits within ${SHUTDOWN_WITHIN_MS / 1000} s, once its workers have exited`,
            actual: s.exit ? `${s.ms} ms` : 'still running',
            explanation: `Exit when the last worker has exited (count them yourself: disconnect() removes a worker from cluster.workers at once). A heartbeat timer or an open handle in a worker can keep it alive: unref() it. ${replay}`,
            showOutput: true,
          });
        }
        if (s.exit.signal || s.exit.code !== 0) {
          ctx.fail(`The primary ended with ${s.exit.signal ?? `exit code ${s.exit.code}`} after SIGTERM.`, {
            expected: 'exit code 0: a clean shutdown',
            actual: s.exit.signal ? `killed by ${s.exit.signal}` : `exit code ${s.exit.code}`,
            explanation: `Handle SIGTERM in the primary (process.on('SIGTERM', ...)) and call process.exit(0) once every worker has exited. ${replay}`,
            showOutput: true,
          });
        }
        if (s.leftover.length) {
          ctx.fail(`Process ${s.leftover.join(', ')} was still running after the primary exited.`, {
            expected: 'no worker left behind',
            actual: `${s.leftover.join(', ')} alive`,
            explanation: `The primary must wait for every worker's 'exit' before it exits. Among the ways to exit too soon: exiting on 'disconnect' instead of 'exit', or counting the live workers in cluster.workers, which drops a worker as soon as it disconnects, before its process exits. ${replay}`,
          });
        }
        ctx.log(`new connections refused ${s.accepting.ms} ms after SIGTERM; exit code 0 after ${(s.ms / 1000).toFixed(2)} s; /slow answered 200; no respawn; nothing left`);
      },
    },
  ],
};

function describeFailure(r, timeline, t0) {
  const t = (x) => ((x - t0) / 1000).toFixed(2);
  const before = timeline.filter((e) => e.at <= r.end).pop();
  const what = r.ok ? `status ${r.status}` : r.abandoned ? 'no answer' : r.error;
  const late = r.sentAfterMs ? ` (request sent ${r.sentAfterMs} ms after its connection opened)` : '';
  return `    t=${t(r.start)}..${t(r.end)} s  ${r.method} ${r.url.replace(/^http:\/\/[^/]+/, '')}${late}: ${what}${before ? `   (last event: ${before.kind} at t=${t(before.at)} s)` : ''}`;
}

/** A request whose start and end are known, like the load's. */
async function timed(ctx, path, options) {
  const start = now();
  const r = await request(ctx.port, path, { signal: ctx.signal, ...options });
  return { ...r, start, end: now() };
}

/**
 * For a killed worker that was never replaced: the possible causes, the
 * crash-loop protection among them (the victim had been serving for a while,
 * so its death is not a start-up death).
 */
function matureDeathHint(victim) {
  return {
    explanation: `Worker ${victim} had been serving for more than a second when it was killed. If your crash-loop protection stopped respawning, it counted this death as a start-up death: count only deaths within 1 s of the worker's fork (worker.forkedAt = Date.now() at fork). Otherwise the 'exit' handler does not fork a replacement for a worker killed from outside.`,
    hint: "in cluster.on('exit'): count the death toward the crash loop only if Date.now() - worker.forkedAt < 1000; fork a replacement otherwise.",
  };
}

/**
 * What runs under the whole chaos: its schedule, the load (fresh connections
 * and keep-alive clients), a sampler of worker lifetimes, and the helpers
 * every event uses. The events' own state (the increments in flight, the
 * config posted, shutdownAt) is set on the returned object.
 */
function startChaos(ctx) {
  const seed = ctx.data.seed;
  // The increments are 200 requests at once, each listening for the step's end.
  setMaxListeners(INCREMENTS + 50, ctx.signal);
  const schedule = scheduleFor(seed);
  const t0 = now();
  ctx.data.t0 = t0;
  const say = (msg) => ctx.log(`t=${((now() - t0) / 1000).toFixed(2)} s  ${msg}`);
  const timeline = []; // { kind, at }
  ctx.data.timeline = timeline;
  const faults = []; // see shared/chaos.js excusedBy
  const card = { seed, schedule: schedule.map((e) => e.kind) };
  ctx.data.card = card;
  say(`schedule for seed ${seed}: ${schedule.map((e) => e.kind).join(', ')}`);

  // Who is a worker, since when; sampled often enough to see a worker that
  // lives 50 ms (one that dies at start-up).
  const firstSeen = new Map();
  let sampling = true;
  // And when each died: a death long after its fork (a kill, a crash, a
  // hang, a retirement) is not a start-up death and must not count toward
  // the crash loop.
  const diedAt = new Map();
  let aliveBefore = new Set();
  const sampler = (async () => {
    while (sampling && !ctx.signal.aborted) {
      const current = ctx.workers();
      for (const pid of current) if (!firstSeen.has(pid)) firstSeen.set(pid, now());
      for (const pid of aliveBefore) if (!current.includes(pid) && !diedAt.has(pid)) diedAt.set(pid, now());
      aliveBefore = new Set(current);
      await sleepFor(15, ctx.signal).catch(() => {});
    }
  })();
  // Only the deaths the verifier itself caused (a SIGKILL, GET /crash): every
  // primary sees those as unplanned. The old workers a rolling restart
  // retires, and a hung worker the primary kills itself, a program may leave
  // out of its count (rightly: they are not crashes), so counting them here
  // would credit deaths the program never counted, and a schedule with a
  // restart before the crash loop made too few for its count to trip.
  const caused = new Set();
  const matureDeathsSince = (t) => [...diedAt].filter(([pid, at]) => caused.has(pid) && at >= t && at - (firstSeen.get(pid) ?? at) >= 1000).length;

  const loads = [
    ctx.startLoad({ path: '/', concurrency: 3, timeoutMs: LOAD_TIMEOUT_MS }),
    ctx.startLoad({ path: '/config', concurrency: 1, timeoutMs: LOAD_TIMEOUT_MS }),
  ];
  const allLoadResults = () => loads.flatMap((l) => l.results);
  // Beside them, connections whose request comes 200 ms after they open: a
  // worker retired by a rolling restart holds some whose request it has not
  // read yet, every time (shared/late-senders.js). Judged with the load by
  // no-failed-requests; not part of the capacity evidence.
  const lateSenders = startLateSenders(ctx);
  ctx.onTeardown(() => lateSenders.stop());
  // Keep-alive clients beside the fresh connections, through the whole
  // chaos and the shutdown (lesson graceful-shutdown's drain check).
  const keepAlive = startKeepAliveClients(ctx.port, { connections: KEEP_ALIVE_CLIENTS, timeoutMs: LOAD_TIMEOUT_MS, endOnRefusal: () => chaos.shutdownAt !== null });
  ctx.onTeardown(() => keepAlive.stop());
  // When each worker first answered, on any of the traffic (the load, the
  // late senders, the keep-alive clients, settle's own probes): a victim must
  // have served for a while. Counted from the load alone, a replacement that
  // answered settle's probe and then, on a starved machine, no load request
  // for seconds was never old enough, and a program that respawns at once
  // failed with "No worker answered for a whole second" (seed 152693).
  const firstAnswer = new Map();
  const sources = () => [...loads.map((l) => l.results), lateSenders.results, keepAlive.results];
  const scanned = new Map();
  const noteAnswer = (pid, at) => {
    if (pid !== undefined && !(firstAnswer.get(pid) <= at)) firstAnswer.set(pid, at);
  };
  const matureWorkers = () => {
    for (const results of sources()) {
      for (let i = scanned.get(results) ?? 0; i < results.length; i++) noteAnswer(results[i].pid, results[i].end);
      scanned.set(results, results.length);
    }
    return ctx.workers().filter((pid) => firstAnswer.has(pid) && now() - firstAnswer.get(pid) >= MATURE_MS);
  };
  const waitMature = async (all) => {
    const r = await ctx.poll(
      () => {
        const mature = matureWorkers();
        return (all ? mature.length === ctx.workers().length : mature.length > 0) && mature;
      },
      { timeoutMs: 3000, intervalMs: 25 },
    );
    return r.ok ? r.value : matureWorkers();
  };
  const pickVictim = async (event) => {
    const candidates = await waitMature(false);
    if (candidates.length === 0) {
      const seen = ctx.workers().map((pid) => (firstAnswer.has(pid) ? `${pid} first answered ${((now() - firstAnswer.get(pid)) / 1000).toFixed(2)} s ago` : `${pid} never answered`));
      ctx.fail(`No worker had been answering for ${MATURE_MS / 1000} s when the verifier looked for one to kill.`, {
        expected: `a worker that has served for ${MATURE_MS / 1000} s (the verifier waited 3 s for one)`,
        actual: seen.length ? seen.join('; ') : 'no worker running',
        showOutput: true,
      });
    }
    return candidates[Math.min(candidates.length - 1, Math.floor(event.pick * candidates.length))];
  };
  const primaryAlive = (when) => expectPrimaryAlive(ctx, when);
  const settle = async () => {
    const r = await ctx.waitForWorkers(WORKERS, { timeoutMs: REPLACE_WITHIN_MS });
    primaryAlive('during the chaos');
    if (!r.ok) {
      ctx.fail(`The cluster did not get back to ${WORKERS} workers.`, {
        expected: `${WORKERS} workers`,
        actual: `${r.value.length}: ${r.value.join(', ')}`,
        showOutput: true,
      });
    }
    // Every worker that answered settle's probes answered by the time it
    // returns: that time is when they were first seen serving, at the latest.
    const silent = await ctx.waitAllAnswering({ timeoutMs: 3000 });
    const at = now();
    for (const pid of ctx.workers()) if (!silent.includes(pid)) noteAnswer(pid, at);
  };

  const stopSampler = async () => {
    sampling = false;
    await sampler;
  };
  const chaos = {
    ctx, seed, schedule, t0, say, timeline, faults, card, firstSeen, diedAt, caused, matureDeathsSince, loads, lateSenders, allLoadResults, keepAlive, stopSampler,
    pickVictim, waitMature, primaryAlive, settle, shutdownAt: null, increments: null, incrementsBefore: null, configPosted: null,
  };
  return chaos;
}

async function runChaos(ctx) {
  const chaos = startChaos(ctx);
  const { schedule, t0, say, timeline, faults, card, firstSeen, matureDeathsSince, loads, lateSenders, keepAlive, primaryAlive, settle } = chaos;

  for (const [index, event] of schedule.entries()) {
    if (event.kind === 'shutdown') break;
    // Made certain, not left to the seed's timing: before the crash loop, at
    // least MATURE_DEATHS workers that had served for a while killed or
    // crashed by the verifier in the last 9 s (more kills if the schedule
    // left fewer). A primary that
    // counts every death toward the crash loop stops respawning here, and
    // the next kill finds no replacement; a right one replaces them all.
    if (event.kind === 'crash-loop') {
      // Counted from the last SIGUSR2 on: a primary may start its crash-loop
      // count afresh on a restart (the lesson's way out of a crash loop), and
      // deaths it has forgotten prove nothing. Then one kill more: its
      // replacement is what a primary that counted these deaths would refuse.
      const restartAt = timeline.filter((e) => e.kind === 'rolling-restart').at(-1)?.at ?? -Infinity;
      const since = () => Math.max(now() - 9000, restartAt);
      // Enough is checked before each kill: checked after the test that
      // ended the loop, it let one kill more through, whose victim had to
      // have served 1.1 s though every worker had just been replaced (the
      // verifier then waited 3 s and failed a program that respawns at once:
      // "No worker answered for a whole second", seed 81304, 2 runs in 4).
      for (let extra = 0; extra <= MATURE_DEATHS && matureDeathsSince(since()) < MATURE_DEATHS; extra++) {
        primaryAlive('during the chaos');
        ctx.log(`t=${((now() - t0) / 1000).toFixed(2)} s  extra kill (${matureDeathsSince(since())} serving workers killed or crashed by the verifier in the last 9 s${restartAt > now() - 9000 ? ', since the SIGUSR2' : ''})`);
        timeline.push({ kind: 'kill', at: now() });
        await EVENTS.kill.inject(chaos, { pick: (extra % MATURE_DEATHS) / MATURE_DEATHS });
        await settle();
      }
    }
    await sleepFor(event.gapMs, ctx.signal);
    primaryAlive('during the chaos');
    ctx.log(`t=${((now() - t0) / 1000).toFixed(2)} s  event ${index + 1}/${schedule.length}: ${event.kind}`);
    timeline.push({ kind: event.kind, at: now() });
    await EVENTS[event.kind].inject(chaos, event);
    // Back to 3 answering workers before the next fault. Not after the
    // crash loop: whether the program recovers from it is its own check.
    if (EVENTS[event.kind].settle) await settle();
  }

  // Before the shutdown: everything acknowledged, every worker agrees.
  const incrementResults = chaos.increments ? await chaos.increments : [];
  const values = incrementResults.filter((r) => !failed(r) && Number.isInteger(r.json?.count)).map((r) => r.json.count);
  const finalCounts = await answersFromAll(ctx, '/count', (r) => r.json?.count);
  const finalConfigs = await answersFromAll(ctx, '/config', (r) => r);
  card.increments = judgeIncrements({ sent: INCREMENTS, before: chaos.incrementsBefore, values, finalCounts });

  // Shutdown: a /slow request in flight, then SIGTERM.
  await sleepFor(schedule.at(-1).gapMs, ctx.signal);
  timeline.push({ kind: 'shutdown', at: now() });
  // Requests caught in a killed worker never answer; stop waiting for them.
  const stuck = (p) => faults.some((f) => p.start <= f.at + 250);
  const loadResults = (await Promise.all(loads.map((l) => l.stop({ abandon: stuck })))).flat();
  const lateResults = await lateSenders.stop({ abandon: stuck });
  const loadEnd = now();
  say(`GET /slow?ms=${SLOW_MS} on a keep-alive connection, then SIGTERM to the whole group`);
  // Read by a worker right before the signal (so nearly all of it is still
  // to run at the signal), on a connection that goes on sending afterwards
  // (lesson graceful-shutdown's in-flight request). Still to run at the
  // signal: at least HEARTBEAT_TIMEOUT and a half, so that a primary that
  // goes on applying its heartbeat timeout to draining workers (they stop
  // beating when told to stop) kills this one before its answer, every run.
  // With 3/4 of it allowed to have passed, a request seen read late by a
  // starved verifier had 500 ms left: answered before that kill, a pass.
  const slowConn = await startFreshKeepAliveInFlight(ctx, `/slow?ms=${SLOW_MS}`, { timeoutMs: SLOW_MS + 6000, then: '/', freshMs: SLOW_MS - HEARTBEAT_TIMEOUT * 1.5 });
  ctx.onTeardown(() => slowConn.stop());
  const sigAt = now();
  const drained = ctx.workers();
  chaos.shutdownAt = sigAt;
  ctx.signalGroup('SIGTERM');
  // From the signal on, alongside the wait for the exit.
  const accepting = watchStopsAccepting(ctx, { withinMs: STOP_ACCEPTING_MS });
  const exit = await ctx.program.waitForExit(SHUTDOWN_WITHIN_MS + 1000);
  const exitMs = Math.round(now() - sigAt);
  // Right when the primary exits, its workers must be gone already (the
  // graceful-shutdown lesson's grace for one on its way out), not some time later.
  const leftover = exit
    ? (await ctx.poll(() => ctx.program.processes().length === 0, { timeoutMs: SURVIVOR_GRACE_MS, intervalMs: 20 })).ok
      ? []
      : ctx.program.processes().map((p) => p.pid)
    : [];
  const slowOutcome = await slowConn.result;
  const slowResult = { ok: slowOutcome.outcome === 'ok', status: slowOutcome.status, error: `${slowOutcome.outcome} (${slowOutcome.code ?? 'no answer'})` };
  const keepAliveResults = [...(await keepAlive.stop()), ...(await slowConn.stop())];
  const fault = (r) => Boolean(excusedBy({ ok: false, code: r.code, start: r.start, end: r.end }, faults));
  const kaClasses = classifyKeepAlive(keepAliveResults, { stoppedAt: sigAt, excuse: fault });
  const lingering = lingeringWorkers(keepAliveResults, new Map(drained.map((pid) => [pid, sigAt])));
  card.keepAlive = { requests: keepAliveResults.length, answered: kaClasses.answered, retries: kaClasses.retries.length, excused: kaClasses.excused.length, problems: describeKeepAliveFailures(kaClasses) };
  say(summarizeKeepAlive(keepAliveResults, kaClasses));
  await chaos.stopSampler();
  const respawned = [...firstSeen].filter(([, t]) => t > sigAt + 20).map(([pid]) => pid);
  card.shutdown = {
    accepting: await accepting,
    exit,
    ms: exitMs,
    slow: slowResult.ok ? (slowResult.status === 200 ? 'answered 200' : `answered status ${slowResult.status}`) : slowResult.error,
    respawned,
    leftover,
    lingering,
    keepAliveProblems: card.keepAlive.problems,
  };

  // The score card.
  const requests = [...loadResults, ...lateResults, ...incrementResults];
  const { succeeded, excused, unexcused } = classify(requests, faults);
  card.requests = {
    sent: requests.length,
    succeeded: succeeded.length,
    excused: excused.length,
    excusedByCause: causes(excused),
    failed: unexcused.length,
    failedByCause: causes(unexcused),
  };
  card.availabilityPercent = requests.length ? Math.round((1000 * succeeded.length) / requests.length) / 10 : 0;
  card.longestNoAnswerMs = longestSilence(loadResults, t0, loadEnd);
  ctx.data.unexcused = unexcused.sort((a, b) => a.start - b.start);

  // Config: every answer that started CONVERGE_MS after the update carries it.
  const posted = chaos.configPosted?.body;
  const { checked, stale } = posted ? staleAfterUpdate(loadResults, posted, chaos.configPosted.at) : { checked: [], stale: [] };
  ctx.data.configCheck = {
    posted,
    checked: checked.length,
    stale,
    finalOk: finalConfigs.length > 0 && finalConfigs.every((r) => answersConfig(r, posted)),
    finalText: `${finalConfigs.length} workers answered ${[...new Set(finalConfigs.map((r) => show(r.json?.config)))].join(' / ') || 'nothing'}`,
  };

  for (const line of scorecardLines(card)) ctx.log(line);
  ctx.attach('scorecard', card);
}

async function killAndSeeReplaced(chaos, event) {
  const { ctx, say, faults, pickVictim } = chaos;
  const victim = await pickVictim(event);
  say(`SIGKILL worker ${victim}`);
  faults.push({ kind: 'kill', at: now() });
  chaos.caused.add(victim);
  ctx.killWorker(victim, 'SIGKILL');
  await waitForReplacement(ctx, WORKERS, [victim], { timeoutMs: REPLACE_WITHIN_MS, neverCame: matureDeathHint(victim) });
}

async function crashAndSeeReplaced(chaos) {
  const { ctx, say, faults, waitMature } = chaos;
  await waitMature(true);
  const before = ctx.workers();
  say('GET /crash');
  const { result, died } = await crashOneWorker(ctx, before);
  for (const pid of died) chaos.caused.add(pid);
  // Its own connection is reset by its death: that is the moment.
  faults.push({ kind: 'crash', at: result.end });
  await waitForReplacement(ctx, WORKERS, died, { timeoutMs: REPLACE_WITHIN_MS });
}

async function hangAndSeeKilled(chaos) {
  const { ctx, say, faults, waitMature, primaryAlive } = chaos;
  await waitMature(true);
  const before = ctx.workers();
  say('GET /hang');
  const hangSent = now();
  const hang = timed(ctx, '/hang', { timeoutMs: 8000 });
  const gone = await ctx.poll(
    () => {
      const g = before.filter((p) => !ctx.workers().includes(p));
      return g.length ? g : null;
    },
    { timeoutMs: REPLACE_WITHIN_MS, intervalMs: 10 },
  );
  const seenDead = now();
  if (!gone.ok) {
    primaryAlive('while a worker was hung');
    const f = await hungNotKilledFailure(ctx, before, { withinMs: REPLACE_WITHIN_MS, heartbeatTimeout: HEARTBEAT_TIMEOUT });
    ctx.fail(f.message, { ...f, explanation: `${f.explanation} Replay the same schedule: ${replayCommand(ctx)}`, reproduce: ctx.curl('/hang'), showOutput: true });
  }
  // Its own connection is reset by its death: that is the moment.
  const h = await Promise.race([hang, sleepFor(1000, ctx.signal).then(() => null)]);
  expectHangUnanswered(ctx, h);
  faults.push({ kind: 'hang', from: hangSent, at: Math.min(h?.end ?? seenDead, seenDead) });
  say(`worker ${gone.value.join(', ')} killed ${Math.round(seenDead - hangSent)} ms after GET /hang`);
  await waitForReplacement(ctx, WORKERS, gone.value, { timeoutMs: REPLACE_WITHIN_MS });
}

async function postConfig(chaos, event) {
  const { ctx, say } = chaos;
  const body = { seed: chaos.seed, version: Math.round(event.pick * 1000), updatedBy: 'cluster-workshop verify' };
  say(`POST /config ${JSON.stringify(body)}`);
  const r = await timed(ctx, '/config', { method: 'POST', body, timeoutMs: 3000 });
  if (!r.ok || r.status < 200 || r.status >= 300) {
    ctx.fail('POST /config with a JSON object was not accepted.', {
      expected: 'status 200 (the config goes to the primary, which sends it to every worker)',
      actual: r.ok ? `status ${r.status}: ${r.text.slice(0, 200)}` : r.error,
      reproduce: `curl -s -X POST -H 'content-type: application/json' -d '${JSON.stringify(body)}' ${ctx.curl('/config').split(' ').pop()}`,
      showOutput: true,
    });
  }
  chaos.configPosted = { body, at: r.end };
}

async function rollingRestart(chaos) {
  const { ctx, say, primaryAlive } = chaos;
  const before = ctx.workers();
  // Lesson rolling-restart's check: each replacement held right after
  // 'online', capacity judged from when workers accepted connections.
  const hold = await holdNewWorkersAtOnline(ctx, { initial: before });
  const stream = startSlowStream(ctx, { path: STREAM_PATH, intervalMs: STREAM_INTERVAL_MS, timeoutMs: 8000, until: () => hold.held.size >= before.length || ctx.program.exited });
  ctx.onTeardown(() => stream.stop());
  say(`SIGUSR2 (rolling restart), with a ${STREAM_PATH} every ${STREAM_INTERVAL_MS} ms until the last replacement is forked`);
  const sent = now();
  ctx.signalPrimary('SIGUSR2');
  // Waits as long as the limit can grow for the slow requests (judged below).
  const r = await ctx.waitForWorkers(WORKERS, { timeoutMs: ROLLING_WITHIN_MS + before.length * STREAM_SLOW_MS, accept: (pids) => pids.every((p) => !before.includes(p)) });
  const doneAt = now();
  await hold.stop();
  const streamResults = await stream.stop();
  expectSurvivedSigusr2(ctx);
  primaryAlive('during the rolling restart');
  if (!r.ok) {
    const stillOld = r.value.filter((p) => before.includes(p));
    const fresh = r.value.filter((p) => !before.includes(p));
    if (stillOld.length && fresh.length >= WORKERS) {
      ctx.fail(`The old workers ${stillOld.join(', ')} never exited after the rolling restart (seed ${ctx.data.seed}).`, {
        expected: `the retired workers exit within ${ROLLING_WITHIN_MS / 1000} s: ${WORKERS} new workers and none of ${before.join(', ')}`,
        actual: `${fresh.length} new workers (${fresh.join(', ')}), and ${stillOld.join(', ')} still running`,
        explanation:
          "The replacements run, but the retired workers stay alive. Something keeps a disconnected worker's event loop busy: most often the heartbeat setInterval (unref() it, or clear it when the worker is told to stop), or keep-alive clients never told to leave (Connection: close once the server no longer listens). " +
          `Replay the same schedule: ${replayCommand(ctx)}`,
        hint: "beat.unref() on the worker's heartbeat interval.",
        showOutput: true,
      });
    }
    ctx.fail(`The rolling restart did not replace every worker within ${ROLLING_WITHIN_MS / 1000} s.`, {
      expected: `${WORKERS} workers, none of ${before.join(', ')}`,
      actual: `${r.value.length}: ${r.value.join(', ')}`,
      hint: 'for each old worker: fork, wait for the new one to listen, then disconnect the old one (the rolling-restart lesson).',
      showOutput: true,
    });
  }
  await ctx.waitAllAnswering({ timeoutMs: 3000 });
  const { dips, timeline: accepts } = acceptDips({ results: chaos.allLoadResults(), old: before, final: r.value, from: sent, to: now(), n: WORKERS, toleranceMs: DIP_TOLERANCE_MS, heldUntil: hold.heldUntil(), lateSenders: chaos.lateSenders.results });
  // An old worker stopped accepting at its last answer on a fresh connection.
  const stoppedAccepting = new Map(before.filter((pid) => accepts.has(pid)).map((pid) => [pid, accepts.get(pid).last]));
  const limitMs = ROLLING_WITHIN_MS + slowRequestsNeed(stoppedAccepting, streamResults);
  const tookMs = Math.round(doneAt - sent);
  say(`rolling restart done in ${tookMs} ms (limit ${(limitMs / 1000).toFixed(1)} s: 10 s plus what the slow requests the old workers held still needed): ${r.value.join(', ')}`);
  if (tookMs > limitMs) {
    ctx.fail(`The rolling restart did not replace every worker within ${(limitMs / 1000).toFixed(1)} s (seed ${ctx.data.seed}).`, {
      expected: `${WORKERS} new workers within ${ROLLING_WITHIN_MS / 1000} s of SIGUSR2, plus ${((limitMs - ROLLING_WITHIN_MS) / 1000).toFixed(1)} s that the slow requests the old workers held still needed`,
      actual: `the last old worker exited ${(tookMs / 1000).toFixed(1)} s after SIGUSR2`,
      explanation: `Possible causes: replacements slow to start; a restart that waits for each old worker to exit, whose workers take long to exit once drained (a heartbeat interval not unref()'d, keep-alive clients never told to leave). Replay the same schedule: ${replayCommand(ctx)}`,
      hint: 'for each old worker: fork, wait for the new one to listen, then disconnect the old one; unref() the worker timers.',
      showOutput: true,
    });
  }
  if (dips.length) {
    const f = capacityFailure({ dips, timeline: accepts, old: before, signalAt: sent, results: chaos.allLoadResults(), workers: WORKERS, what: 'the rolling restart', holdMs: HOLD_MS, replacements: [...hold.held.keys()], alive: isAlive });
    ctx.fail(f.message, { ...f, explanation: `${f.explanation} Replay the same schedule: ${replayCommand(ctx)}`, showOutput: true });
  }
  // One replacement at a time, judged as lesson rolling-restart does (every
  // new worker is held 1 s after 'online', so one forked during another's
  // hold was forked before that one could listen). Not when more workers were
  // forked than there were old ones: an extra fork overlaps a replacement
  // without any parallel restart.
  const together = hold.held.size > before.length ? [] : startedTogether(hold.held, { holdMs: HOLD_MS });
  if (together.length) {
    const f = startedTogetherFailure(together, { what: 'the rolling restart', holdMs: HOLD_MS });
    ctx.fail(f.message, { ...f, explanation: `${f.explanation} Replay the same schedule: ${replayCommand(ctx)}`, showOutput: true });
  }
  // Last: a restart that left no worker to take them (a dip) loses slow
  // requests too, and the dip is what to fix.
  expectStreamAnswered(ctx, streamResults, sent);
}

/** Fails the chaos when a slow request of the rolling restart was cut in flight (shared/slow-stream.js). */
function expectStreamAnswered(ctx, results, sent) {
  const cut = cutInFlight(results);
  if (!cut.length) return;
  const f = streamCutFailure({ cut, sent: results.length, signalAt: sent, path: STREAM_PATH, intervalMs: STREAM_INTERVAL_MS, shutdownTimeoutMs: SHUTDOWN_TIMEOUT, what: 'the rolling restart', describe: describeResult });
  ctx.fail(`${f.message.slice(0, -1)} (seed ${ctx.data.seed}).`, { ...f, explanation: `${f.explanation} Replay the same schedule: ${replayCommand(ctx)}`, showOutput: true });
}

async function startIncrements(chaos) {
  const { ctx, say } = chaos;
  const base = await ctx.get('/count');
  chaos.incrementsBefore = base.json.count;
  say(`${INCREMENTS} concurrent POST /count (count is ${base.json.count})`);
  chaos.increments = Promise.all(Array.from({ length: INCREMENTS }, () => timed(ctx, '/count', { method: 'POST', timeoutMs: 8000 })));
  // Not awaited: the next events happen while the increments are in flight.
}

/** One answer from each worker (fresh connections until every pid answered), mapped by pick. */
async function answersFromAll(ctx, path, pick) {
  const { results } = await ctx.reachWorkers(path, { count: ctx.workers().length, maxRequests: 40 });
  const byPid = new Map();
  for (const r of results) if (!failed(r) && r.pid !== undefined && !byPid.has(r.pid)) byPid.set(r.pid, pick(r));
  return [...byPid.values()];
}
