// Lesson 11 (capstone): the whole course in one program, under continuous
// load over fresh connections, while a schedule drawn from a seed SIGKILLs
// workers, crashes one, hangs one, updates the config, rolls a restart, sends
// 200 concurrent increments, starts a crash loop (POISON_FILE) and finally
// sends SIGTERM. It passes when no request fails except those in flight to a
// worker at the moment it was killed or hung, no increment is lost, the
// crash loop stops within 10 s and the shutdown is clean. The chaos step
// keeps a score card (step log, and `scorecard` on its JSON report entry).
import { randomBytes } from 'node:crypto';
import { setMaxListeners } from 'node:events';
import { rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { request } from '../lib/harness/http.js';
import { failed } from '../lib/harness/load.js';
import { StepFailure } from '../lib/harness/failure.js';
import { sleepFor } from '../lib/harness/context.js';
import { isAlive } from '../lib/harness/processes.js';
import { countWorkers, expectPrimaryAlive, waitForReplacement } from './shared/workers.js';
import {
  causes,
  causesText,
  classify,
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
const CRASH_LOOP_WITHIN_MS = 10_000;
// No new worker for this long after the poisoned deaths: the primary stopped.
const CRASH_LOOP_QUIET_MS = 1500;
// A worker forked while POISON_FILE exists must throw during start-up; one
// still running this long after its fork ignores the file.
const POISON_SURVIVOR_MS = 6000;
// A victim must have been serving this long, so that its death never counts
// toward the crash loop ("died within a second of starting").
const MATURE_MS = 1100;
const SHUTDOWN_WITHIN_MS = 5000;
const SLOW_MS = 1500;
const LOAD_TIMEOUT_MS = 4000;

const now = () => performance.now();

export default {
  env: { WORKERS: String(WORKERS), HEARTBEAT_TIMEOUT: String(HEARTBEAT_TIMEOUT), POISON_FILE },
  steps: [
    {
      id: 'worker-count',
      title: `the primary has exactly ${WORKERS} workers`,
      async run(ctx) {
        ctx.data.seed = ctx.options?.seed ?? freshSeed();
        ctx.data.primaryPid = ctx.primaryPid;
        ctx.log(`seed ${ctx.data.seed}: replay this run with ${replayCommand(ctx)}`);
        await countWorkers(ctx, WORKERS, { wrongHint: 'fork Number(process.env.WORKERS) workers (lesson 2).' });
      },
    },
    {
      id: 'routes',
      title: 'GET /config, GET /count, GET /slow answer as in lessons 4, 5 and 7; a bad config gets 400',
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
      title: 'about 15 s of chaos under load: kills, a crash, a hang, a config update, a rolling restart, increments, a crash loop, SIGTERM',
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
          if (err instanceof StepFailure) {
            err.message = `${err.message} (seed ${ctx.data.seed})`;
            err.explanation = [err.explanation, `Replay this exact schedule: ${replayCommand(ctx)}`].filter(Boolean).join('\n');
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
            'Look at the event just before each failure. Refused during a rolling restart: the old workers left before the new ones listened. ' +
            'Reset or status 500 on POST /count: a worker answered before the primary did, or lost its reply. Failures after SIGUSR2 with the crash loop: ' +
            `the primary forked nothing. Replay the same schedule: ${replayCommand(ctx)}`,
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
        if (i.lost === 0 && i.duplicates === 0 && i.consistent && i.after - i.before <= i.sent) return;
        let message;
        if (!i.consistent) message = `The workers answered different counts after the increments: ${i.finalCounts.join(', ')}.`;
        else if (i.duplicates) message = `${i.duplicates} POST /count answers repeated a value another one had.`;
        else if (i.lost) message = `${i.lost} acknowledged increments are missing from the count.`;
        else message = `The count grew by ${i.after - i.before}, more than the ${i.sent} increments sent.`;
        ctx.fail(`${message} (seed ${ctx.data.seed})`, {
          expected: `each acknowledged POST /count answered a different value, and GET /count from every worker then answers ${i.before} + the number of increments applied`,
          actual: `${i.acknowledged} acknowledged, count ${i.before} -> ${i.after}, ${i.duplicates} duplicates`,
          explanation:
            'The counter lives in the primary, which survives every worker death: a worker asks it over IPC with an id per request and answers with the value the primary gave for that id (lesson 7). ' +
            `Replay the same schedule: ${replayCommand(ctx)}`,
        });
      },
    },
    {
      id: 'config-everywhere',
      title: 'after POST /config, every worker (replacements included) answers the new config',
      async run(ctx) {
        const c = ctx.data.configCheck;
        ctx.log(`${c.checked} GET /config answers from 1 s after the update on; ${c.stale.length} stale; final: ${c.finalText}`);
        if (c.stale.length === 0 && c.finalOk) return;
        const r = c.stale[0];
        ctx.fail(`A worker answered an old config after the update had been acknowledged (seed ${ctx.data.seed}).`, {
          expected: `config ${JSON.stringify(c.posted)} from every worker, at the latest 1 s after the POST`,
          actual: r ? `pid ${r.pid} answered ${JSON.stringify(r.json?.config)} at t=${((r.end - ctx.data.t0) / 1000).toFixed(2)} s` : c.finalText,
          explanation:
            'The primary keeps the latest config and gives it to every worker it forks later: replacements of killed workers, the new workers of a rolling restart and of the crash-loop recovery (lesson 4). ' +
            `Replay the same schedule: ${replayCommand(ctx)}`,
        });
      },
    },
    {
      id: 'crash-loop-contained',
      title: 'with POISON_FILE present, the primary stops respawning within 10 s, and forks again after the file is gone and SIGUSR2',
      async run(ctx) {
        const c = ctx.data.card.crashLoop;
        if (!c) ctx.fail('The crash loop never started: the chaos stopped before it.');
        if (c.survivors.length) {
          ctx.fail(`Worker ${c.survivors.join(', ')} was forked while POISON_FILE existed and kept running (seed ${ctx.data.seed}).`, {
            expected: `a worker forked while the file at POISON_FILE exists throws during start-up, within ${POISON_SURVIVOR_MS / 1000} s of its fork`,
            actual: `${c.survivors.join(', ')} still running ${POISON_SURVIVOR_MS / 1000} s after its fork`,
            explanation:
              'POISON_FILE is how the verifier makes a crash loop: while the file exists, every new worker must fail to start, as a worker with a bad deploy or a missing secret would. ' +
              `Replay the same schedule: ${replayCommand(ctx)}`,
            reproduce: [`touch /tmp/poison && POISON_FILE=/tmp/poison ...   # then: kill -9 <a worker pid>`],
            hint: "at the top of the worker branch: if (process.env.POISON_FILE && fs.existsSync(process.env.POISON_FILE)) throw new Error('POISON_FILE exists');",
            showOutput: true,
          });
        }
        if (!c.contained) {
          ctx.fail(`The primary kept forking workers that die at start-up (seed ${ctx.data.seed}).`, {
            expected: `no new worker for ${CRASH_LOOP_QUIET_MS / 1000} s within ${CRASH_LOOP_WITHIN_MS / 1000} s of the first death: stop after 5 deaths within 1 s of starting in 10 s`,
            actual: `${c.startupDeaths} workers forked and died at start-up${c.forkedUntilEnd ? ', and it was still forking at the end' : ''}`,
            explanation:
              'A worker that dies at start-up will die again: respawning it at once only burns CPU and floods the logs. Count deaths that come within 1 s of the fork, in a 10 s window; at 5, log why and stop forking until SIGUSR2. ' +
              `Replay the same schedule: ${replayCommand(ctx)}`,
            reproduce: [`touch /tmp/poison && POISON_FILE=/tmp/poison ...   # then: kill -9 <a worker pid>`],
            showOutput: true,
          });
        }
        if (!c.recovered) {
          ctx.fail(`After the file was removed and SIGUSR2 sent, the primary did not get back to ${WORKERS} workers (seed ${ctx.data.seed}).`, {
            expected: `${WORKERS} workers answering within 8 s of SIGUSR2`,
            actual: `${c.workersAfter} workers`,
            explanation: `On SIGUSR2, leave crash-loop mode (forget the counted deaths) and fork the missing workers, then roll the others as usual. Replay: ${replayCommand(ctx)}`,
            showOutput: true,
          });
        }
        ctx.log(`${c.startupDeaths} start-up deaths; stopped after ${(c.containedAfterMs / 1000).toFixed(1)} s; ${c.workersAfter} workers again ${(c.recoveredAfterMs / 1000).toFixed(1)} s after SIGUSR2`);
      },
    },
    {
      id: 'shutdown-clean',
      title: `SIGTERM: the /slow request in flight completes, nothing is respawned, the primary exits 0 within ${SHUTDOWN_WITHIN_MS / 1000} s, no worker left`,
      async run(ctx) {
        const s = ctx.data.card.shutdown;
        const replay = `Replay the same schedule: ${replayCommand(ctx)}`;
        if (!s) ctx.fail('The chaos stopped before SIGTERM.');
        if (s.slow !== 'answered 200') {
          ctx.fail(`The GET /slow?ms=${SLOW_MS} in flight at SIGTERM did not complete (${s.slow}).`, {
            expected: 'status 200: a worker finishes its in-flight requests before it exits',
            actual: s.slow,
            explanation: `On SIGTERM, disconnect() every worker (it closes its server and lets requests finish); never kill them right away (lesson 5). ${replay}`,
            showOutput: true,
          });
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
            explanation: `The primary must wait for every worker's 'exit' before it exits. ${replay}`,
          });
        }
        ctx.log(`exit code 0 after ${(s.ms / 1000).toFixed(2)} s; /slow answered 200; no respawn; nothing left`);
      },
    },
  ],
};

function describeFailure(r, timeline, t0) {
  const t = (x) => ((x - t0) / 1000).toFixed(2);
  const before = timeline.filter((e) => e.at <= r.end).pop();
  const what = r.ok ? `status ${r.status}` : r.abandoned ? 'no answer' : r.error;
  return `    t=${t(r.start)}..${t(r.end)} s  ${r.method} ${r.url.replace(/^http:\/\/[^/]+/, '')}: ${what}${before ? `   (last event: ${before.kind} at t=${t(before.at)} s)` : ''}`;
}

/** A request whose start and end are known, like the load's. */
async function timed(ctx, path, options) {
  const start = now();
  const r = await request(ctx.port, path, { signal: ctx.signal, ...options });
  return { ...r, start, end: now() };
}

async function runChaos(ctx) {
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
  const sampler = (async () => {
    while (sampling && !ctx.signal.aborted) {
      for (const pid of ctx.workers()) if (!firstSeen.has(pid)) firstSeen.set(pid, now());
      await sleepFor(15, ctx.signal).catch(() => {});
    }
  })();

  const loads = [
    ctx.startLoad({ path: '/', concurrency: 3, timeoutMs: LOAD_TIMEOUT_MS }),
    ctx.startLoad({ path: '/config', concurrency: 1, timeoutMs: LOAD_TIMEOUT_MS }),
  ];
  const allLoadResults = () => loads.flatMap((l) => l.results);
  // When each worker first answered: a victim must have served for a while.
  const firstAnswer = new Map();
  const scanned = loads.map(() => 0);
  const matureWorkers = () => {
    loads.forEach((l, i) => {
      for (; scanned[i] < l.results.length; scanned[i]++) {
        const r = l.results[scanned[i]];
        if (r.pid !== undefined && !firstAnswer.has(r.pid)) firstAnswer.set(r.pid, r.end);
      }
    });
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
    if (candidates.length === 0) ctx.fail('No worker answered for a whole second during the chaos.', { showOutput: true });
    return candidates[Math.floor(event.pick * candidates.length)];
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
    await ctx.waitAllAnswering({ timeoutMs: 3000 });
  };

  let increments = null;
  let configPosted = null;
  const incrementsCard = { sent: INCREMENTS, acknowledged: 0, before: null, after: null, lost: null, duplicates: 0 };

  const run = {
    async kill(event) {
      const victim = await pickVictim(event);
      say(`SIGKILL worker ${victim}`);
      faults.push({ kind: 'kill', at: now() });
      ctx.killWorker(victim, 'SIGKILL');
      await waitForReplacement(ctx, WORKERS, [victim], { timeoutMs: REPLACE_WITHIN_MS });
    },

    async crash() {
      await waitMature(true);
      const before = ctx.workers();
      say('GET /crash');
      const r = await timed(ctx, '/crash', { timeoutMs: 3000 });
      if (r.ok) {
        ctx.fail(`GET /crash answered (status ${r.status}) instead of ending its worker.`, {
          expected: 'no answer: the worker dies of an uncaught exception (lesson 3)',
          actual: `status ${r.status}`,
          reproduce: ctx.curl('/crash'),
          hint: "throw from a setImmediate callback, where express cannot catch it.",
        });
      }
      faults.push({ kind: 'crash', at: r.end });
      const gone = await ctx.poll(() => before.filter((p) => !ctx.workers().includes(p)).length > 0 && before.filter((p) => !ctx.workers().includes(p)), { timeoutMs: 2000, intervalMs: 10 });
      if (!gone.ok) {
        ctx.fail('GET /crash got no answer, but no worker died.', {
          expected: 'the worker that received it exits',
          actual: r.error,
          reproduce: ctx.curl('/crash'),
          showOutput: true,
        });
      }
      await waitForReplacement(ctx, WORKERS, gone.value, { timeoutMs: REPLACE_WITHIN_MS });
    },

    async hang() {
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
        ctx.fail(`No worker was killed within ${REPLACE_WITHIN_MS / 1000} s of GET /hang.`, {
          expected: `the primary kills the worker silent for HEARTBEAT_TIMEOUT=${HEARTBEAT_TIMEOUT} ms, and forks a replacement`,
          actual: `all of ${before.join(', ')} still alive`,
          explanation: 'A hung worker never exits, so only heartbeats checked on a timer of the primary find it (lesson 10).',
          reproduce: ctx.curl('/hang'),
          showOutput: true,
        });
      }
      // Its own connection is reset by its death: that is the moment.
      const h = await Promise.race([hang, sleepFor(1000, ctx.signal).then(() => null)]);
      if (h?.ok) ctx.fail(`GET /hang answered (status ${h.status}) instead of hanging.`, { expected: 'no answer: the event loop blocked forever', actual: `status ${h.status}` });
      faults.push({ kind: 'hang', from: hangSent, at: Math.min(h?.end ?? seenDead, seenDead) });
      say(`worker ${gone.value.join(', ')} killed ${Math.round(seenDead - hangSent)} ms after GET /hang`);
      await waitForReplacement(ctx, WORKERS, gone.value, { timeoutMs: REPLACE_WITHIN_MS });
    },

    async config(event) {
      const body = { seed, version: Math.round(event.pick * 1000), updatedBy: 'cluster-workshop verify' };
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
      configPosted = { body, at: r.end };
    },

    async 'rolling-restart'() {
      const before = ctx.workers();
      say('SIGUSR2 (rolling restart)');
      const sent = now();
      ctx.signalPrimary('SIGUSR2');
      const r = await ctx.waitForWorkers(WORKERS, { timeoutMs: ROLLING_WITHIN_MS, accept: (pids) => pids.every((p) => !before.includes(p)) });
      if (ctx.program.exited && ctx.program.exit.signal === 'SIGUSR2') {
        ctx.fail('The primary died of SIGUSR2.', {
          expected: 'a rolling restart: the primary keeps running and replaces its workers one at a time',
          actual: 'killed by SIGUSR2 (the default action of a signal without a handler)',
          hint: "process.on('SIGUSR2', rollingRestart) in the primary (lesson 6).",
        });
      }
      primaryAlive('during the rolling restart');
      if (!r.ok) {
        ctx.fail(`The rolling restart did not replace every worker within ${ROLLING_WITHIN_MS / 1000} s.`, {
          expected: `${WORKERS} workers, none of ${before.join(', ')}`,
          actual: `${r.value.length}: ${r.value.join(', ')}`,
          hint: 'for each old worker: fork, wait for the new one to listen, then disconnect the old one (lesson 6).',
          showOutput: true,
        });
      }
      say(`rolling restart done in ${Math.round(now() - sent)} ms: ${r.value.join(', ')}`);
      await ctx.waitAllAnswering({ timeoutMs: 3000 });
    },

    async increments() {
      const base = await ctx.get('/count');
      incrementsCard.before = base.json.count;
      say(`${INCREMENTS} concurrent POST /count (count is ${base.json.count})`);
      increments = Promise.all(Array.from({ length: INCREMENTS }, () => timed(ctx, '/count', { method: 'POST', timeoutMs: 8000 })));
      // Not awaited: the next events happen while the increments are in flight.
    },

    async 'crash-loop'(event) {
      const victim = await pickVictim(event);
      const before = ctx.workers();
      writeFileSync(POISON_FILE, 'written by cluster-workshop verify: workers must fail to start while this file exists\n');
      say(`created POISON_FILE ${POISON_FILE}; SIGKILL worker ${victim}`);
      const trigger = now();
      faults.push({ kind: 'kill', at: trigger });
      ctx.killWorker(victim, 'SIGKILL');
      const poisoned = () => [...firstSeen].filter(([pid, t]) => t >= trigger && !before.includes(pid));
      // Quiet means no new worker AND none of the poisoned ones still alive:
      // on a loaded machine a poisoned worker can take over a second to load
      // its modules and reach its POISON_FILE check, and one still loading
      // when the file is removed would start fine and end the loop by itself.
      let lastFork = trigger;
      let lastActivity = trigger;
      let survivors = [];
      for (;;) {
        await sleepFor(25, ctx.signal);
        const list = poisoned();
        if (list.length) lastFork = Math.max(...list.map(([, t]) => t));
        const alive = list.filter(([pid]) => isAlive(pid));
        lastActivity = alive.length ? now() : Math.max(lastActivity, lastFork);
        // A worker alive this long after its fork ignores POISON_FILE.
        survivors = alive.filter(([, t]) => now() - t >= POISON_SURVIVOR_MS).map(([pid]) => pid);
        if (survivors.length) break;
        const quiet = now() - lastActivity;
        if (list.length >= 4 && quiet >= CRASH_LOOP_QUIET_MS) break;
        if (now() - trigger >= CRASH_LOOP_WITHIN_MS + CRASH_LOOP_QUIET_MS) break;
        primaryAlive('during the crash loop');
      }
      const deaths = poisoned().filter(([pid]) => !isAlive(pid)).length;
      const contained =
        !survivors.length && now() - lastActivity >= CRASH_LOOP_QUIET_MS && lastFork - trigger <= CRASH_LOOP_WITHIN_MS && deaths <= 7;
      const loop = {
        startupDeaths: deaths,
        contained,
        survivors,
        containedAfterMs: Math.round(lastFork - trigger),
        forkedUntilEnd: now() - lastFork < CRASH_LOOP_QUIET_MS,
      };
      card.crashLoop = loop;
      say(
        survivors.length
          ? `worker ${survivors.join(', ')} started while the file existed and is still running`
          : `${deaths} workers forked while the file existed; ${contained ? `none after ${(loop.containedAfterMs / 1000).toFixed(1)} s` : 'still forking'}`,
      );

      rmSync(POISON_FILE, { force: true });
      const beforeRecovery = ctx.workers();
      say('removed POISON_FILE; SIGUSR2');
      const sent = now();
      ctx.signalPrimary('SIGUSR2');
      const poisonedPids = new Set(poisoned().map(([pid]) => pid));
      const back = await ctx.waitForWorkers(WORKERS, { timeoutMs: 8000, accept: (pids) => pids.every((p) => !poisonedPids.has(p)) });
      if (ctx.program.exited && ctx.program.exit.signal === 'SIGUSR2') {
        ctx.fail('The primary died of SIGUSR2.', { expected: 'a rolling restart', actual: 'killed by SIGUSR2 (no handler)', hint: "process.on('SIGUSR2', ...) in the primary (lesson 6)." });
      }
      primaryAlive('after SIGUSR2 ended the crash loop');
      const silent = back.ok ? await ctx.waitAllAnswering({ timeoutMs: 3000 }) : [];
      loop.recovered = back.ok && silent.length === 0;
      loop.recoveredAfterMs = Math.round(now() - sent);
      loop.workersAfter = back.value.length;
      // Let the rolling restart that SIGUSR2 also started finish: until every
      // worker is new, or the set has not changed for a second.
      let last = ctx.workers().join();
      let since = now();
      await ctx.poll(
        () => {
          const pids = ctx.workers();
          if (pids.join() !== last) {
            last = pids.join();
            since = now();
          }
          return (pids.length === WORKERS && pids.every((p) => !beforeRecovery.includes(p))) || now() - since >= 1000;
        },
        { timeoutMs: ROLLING_WITHIN_MS, intervalMs: 25 },
      );
      say(`after SIGUSR2: ${ctx.workers().join(', ')}`);
    },
  };

  for (const [index, event] of schedule.entries()) {
    if (event.kind === 'shutdown') break;
    await sleepFor(event.gapMs, ctx.signal);
    primaryAlive('during the chaos');
    ctx.log(`t=${((now() - t0) / 1000).toFixed(2)} s  event ${index + 1}/${schedule.length}: ${event.kind}`);
    timeline.push({ kind: event.kind, at: now() });
    await run[event.kind](event);
    // Back to 3 answering workers before the next fault. Not after the
    // crash loop: whether the program recovers from it is its own check.
    if (['kill', 'crash', 'hang', 'rolling-restart'].includes(event.kind)) await settle();
  }

  // Before the shutdown: everything acknowledged, every worker agrees.
  const incrementResults = increments ? await increments : [];
  const acked = incrementResults.filter((r) => !failed(r) && Number.isInteger(r.json?.count));
  const values = acked.map((r) => r.json.count);
  const finalCounts = await answersFromAll(ctx, '/count', (r) => r.json?.count);
  const finalConfigs = await answersFromAll(ctx, '/config', (r) => JSON.stringify(r.json?.config));
  Object.assign(incrementsCard, {
    acknowledged: acked.length,
    after: finalCounts.length ? Math.max(...finalCounts) : null,
    duplicates: values.length - new Set(values).size,
    consistent: new Set(finalCounts).size === 1,
    finalCounts,
  });
  incrementsCard.lost = Math.max(0, acked.length - ((incrementsCard.after ?? 0) - incrementsCard.before));
  card.increments = incrementsCard;

  // Shutdown: a /slow request in flight, then SIGTERM.
  await sleepFor(schedule.at(-1).gapMs, ctx.signal);
  timeline.push({ kind: 'shutdown', at: now() });
  const slowSent = now();
  say(`GET /slow?ms=${SLOW_MS}, then SIGTERM`);
  const slow = timed(ctx, `/slow?ms=${SLOW_MS}`, { timeoutMs: SLOW_MS + 6000 });
  // The primary hands connections out in the order they came: once a later
  // request has been answered, the /slow one is in a worker's hands.
  await ctx.poll(() => allLoadResults().some((r) => r.start > slowSent + 5 && !failed(r)), { timeoutMs: 2000, intervalMs: 10 });
  // Requests caught in a killed worker never answer; stop waiting for them.
  const stuck = (p) => faults.some((f) => p.start <= f.at + 250);
  const loadResults = (await Promise.all(loads.map((l) => l.stop({ abandon: stuck })))).flat();
  const loadEnd = now();
  const sigAt = now();
  ctx.signalPrimary('SIGTERM');
  const exit = await ctx.program.waitForExit(SHUTDOWN_WITHIN_MS + 1000);
  const exitMs = Math.round(now() - sigAt);
  // Right when the primary exits, its workers must be gone already (a short
  // grace for the kernel to reap them), not some time later.
  const leftover = exit
    ? (await ctx.poll(() => ctx.program.processes().length === 0, { timeoutMs: 200, intervalMs: 20 })).ok
      ? []
      : ctx.program.processes().map((p) => p.pid)
    : [];
  const slowResult = await slow;
  sampling = false;
  await sampler;
  const respawned = [...firstSeen].filter(([, t]) => t > sigAt + 20).map(([pid]) => pid);
  card.shutdown = {
    exit,
    ms: exitMs,
    slow: slowResult.ok ? (slowResult.status === 200 ? 'answered 200' : `answered status ${slowResult.status}`) : slowResult.error,
    respawned,
    leftover,
  };

  // The score card.
  const requests = [...loadResults, ...incrementResults];
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

  // Config: every answer that started 1 s after the update carries it.
  const posted = configPosted?.body;
  const late = posted ? loadResults.filter((r) => r.url.endsWith('/config') && !failed(r) && r.start >= configPosted.at + 1000) : [];
  const stale = late.filter((r) => JSON.stringify(r.json?.config) !== JSON.stringify(posted));
  ctx.data.configCheck = {
    posted,
    checked: late.length,
    stale,
    finalOk: finalConfigs.length > 0 && finalConfigs.every((c) => c === JSON.stringify(posted)),
    finalText: `${finalConfigs.length} workers answered ${[...new Set(finalConfigs)].join(' / ') || 'nothing'}`,
  };

  for (const line of scorecardLines(card)) ctx.log(line);
  ctx.attach('scorecard', card);
}

/** One answer from each worker (fresh connections until every pid answered), mapped by pick. */
async function answersFromAll(ctx, path, pick) {
  const { results } = await ctx.reachWorkers(path, { count: ctx.workers().length, maxRequests: 40 });
  const byPid = new Map();
  for (const r of results) if (!failed(r) && r.pid !== undefined && !byPid.has(r.pid)) byPid.set(r.pid, pick(r));
  return [...byPid.values()];
}
