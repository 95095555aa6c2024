// The graceful-shutdown lesson (graceful-shutdown). Four rounds, each on a
// fresh start, with keep-alive clients (4 connections reused back to back)
// and a /slow?ms=1000 request in flight on one more keep-alive connection:
// SIGTERM to the primary, SIGINT to the whole group (Ctrl-C), SIGTERM to the
// whole group (systemd), and a worker SIGKILLed as the primary gets SIGTERM.
// Each: the /slow request completes with 200, no worker is forked, the
// keep-alive clients are drained (no response cut, none unanswered after a
// retry, no worker serving them 3 s after the signal plus what its requests
// in flight needed), and the primary exits 0 within 5 s, after its workers.
// The killed-worker round is run 5 more times on fresh starts: its outcome
// may depend on an order the verifier cannot choose (docs/races.md).
// A last round: a request that outlives SHUTDOWN_TIMEOUT is in flight at
// SIGTERM; its worker is gone within the limit and the primary exits 0.
import { countWorkers } from './shared/workers.js';
import { startKeepAliveInFlight } from './shared/inflight.js';
import { startFreshKeepAliveInFlight } from './shared/fresh-inflight.js';
import { watchShutdown, exitWithinDeadline, EXIT_DEADLINE_MS } from './shared/shutdown.js';
import { classifyKeepAlive, lingeringWorkers, lingeringFailure, describeKeepAliveFailures, summarizeKeepAlive, cutOnShutdownFailure, DRAIN_MS } from './shared/drain.js';
import { startKeepAliveClients } from '../lib/harness/keepalive.js';
import { readFileSync } from 'node:fs';
import { isAlive } from '../lib/harness/processes.js';
import { watchStopsAccepting, stillAcceptingFailure } from './shared/stops-accepting.js';

const WORKERS = 3;
const SHUTDOWN_TIMEOUT = 5000;
const SLOW_MS = 1000;
const SLOW = `/slow?ms=${SLOW_MS}`;
const STUCK = '/slow?ms=30000';
// The stuck request's worker must be gone by SHUTDOWN_TIMEOUT plus this (the
// primary's kill comes a moment after the worker's own closeAllConnections).
const LIMIT_SLACK_MS = 1500;
// ... and not before SHUTDOWN_TIMEOUT minus this: a shorter limit cuts
// requests that the stated one lets finish.
const LIMIT_EARLY_MS = 1000;
const KEEP_ALIVE_CLIENTS = 4;
// Round 5: how soon after SIGTERM the port must refuse new connections. A
// program that calls disconnect() closes it within milliseconds; a worker
// that drains without closing its server keeps it open until SHUTDOWN_TIMEOUT.
const STOP_ACCEPTING_MS = 2000;

const kill = (signal, target) => `kill -${signal.replace(/^SIG/, '')} ${target}`;

const ROUNDS = {
  sigterm: {
    signal: 'SIGTERM',
    what: 'SIGTERM to the primary',
    send: (ctx) => ctx.signalPrimary('SIGTERM'),
    kill: (ctx) => kill('SIGTERM', ctx.primaryPid),
  },
  sigint: {
    signal: 'SIGINT',
    what: 'SIGINT to the whole group (Ctrl-C)',
    group: true,
    // Twice, 200 ms apart, as people press Ctrl-C: a handler installed
    // with process.once is used up by the first. The second must find the
    // request unfinished too: inFlightStep takes the gap from its budget.
    gapMs: 200,
    send: async (ctx) => {
      ctx.signalGroup('SIGINT');
      await new Promise((r) => setTimeout(r, ROUNDS.sigint.gapMs));
      ctx.log('Ctrl-C again, as people do');
      ctx.signalGroup('SIGINT');
    },
    reach: 'Ctrl-C sends SIGINT to every process of the group',
    kill: (ctx) => `${kill('SIGINT', `-${ctx.primaryPid}`)}; sleep 0.2; ${kill('SIGINT', `-${ctx.primaryPid}`)}   # or Ctrl-C twice in the terminal that runs it`,
  },
  'group-sigterm': {
    signal: 'SIGTERM',
    what: 'SIGTERM to the whole group (systemd)',
    group: true,
    send: (ctx) => ctx.signalGroup('SIGTERM'),
    reach: "systemd (its default KillMode=control-group), kill -TERM -<pgid> and tini -g send SIGTERM to every process of the group",
    kill: (ctx) => `${kill('SIGTERM', `-${ctx.primaryPid}`)}   # what systemd's KillMode=control-group sends`,
  },
  'killed-worker': {
    signal: 'SIGTERM',
    what: 'SIGTERM to the primary as a worker is killed',
    // The primary is paused (SIGSTOP) while the worker dies, so that when it
    // resumes it finds both SIGTERM and SIGCHLD pending, having read neither:
    // which it handles first is up to its threads (docs/races.md), so the
    // killed-worker-again step runs this again on fresh starts.
    send: async (ctx, victim) => {
      ctx.log(`kill -TERM ${ctx.primaryPid}; kill -KILL ${victim}   (the primary and a worker, at once)`);
      ctx.program.signalPrimary('SIGSTOP');
      try {
        // Stopped for real (state T) before the worker dies, so that the
        // death is news to it when it resumes.
        await ctx.poll(() => processState(ctx.primaryPid) === 'T', { timeoutMs: 1000, intervalMs: 2 });
        process.kill(victim, 'SIGKILL');
        await ctx.poll(() => !isAlive(victim), { timeoutMs: 1000, intervalMs: 2 });
        ctx.program.signalPrimary('SIGTERM');
      } finally {
        ctx.program.signalPrimary('SIGCONT');
      }
    },
    kill: (ctx, victim) => `kill -TERM ${ctx.primaryPid}; kill -KILL ${victim ?? '<a worker pid>'}`,
  },
};
const ORDER = Object.keys(ROUNDS);

function describeExit(exit) {
  if (!exit) return 'still running';
  return exit.signal ? `killed by ${exit.signal}` : `exited with code ${exit.code}`;
}

/** Lines of the program's output that show an 'error' nobody listened for on a worker. */
function unhandledWorkerError(ctx) {
  return ctx.program.telltaleLines().some((l) => /EPIPE|ERR_IPC_CHANNEL_CLOSED|Unhandled 'error' event|channel closed/i.test(l));
}

/** Step 1 of a round: a /slow request in flight when the signal comes completes with 200. */
function inFlightStep(key) {
  const round = ROUNDS[key];
  const first = key === ORDER[0];
  return {
    id: `${key}-in-flight`,
    title: `${round.what}: a ${SLOW} request in flight completes with 200`,
    // Later rounds start the program again: room for a slow start-up.
    timeoutMs: first ? 15000 : 30000,
    async run(ctx) {
      if (!first) {
        ctx.log(`starting again for the round: ${round.what}`);
        await ctx.start();
      }
      const workers = await countWorkers(ctx, WORKERS, { wrongHint: 'fork Number(process.env.WORKERS) workers (the fork lesson).' });
      const watch = watchShutdown(ctx, round.signal);
      // The keep-alive clients stop once the server refuses them after the signal.
      const clients = startKeepAliveClients(ctx.port, { connections: KEEP_ALIVE_CLIENTS, timeoutMs: 3000, endOnRefusal: () => watch.signalAt !== null });
      ctx.onTeardown(() => clients.stop()); // they span steps: stopped by the drains step, or at the end of the run
      // Every client has reused its connection at least once before the signal.
      await ctx.poll(() => new Set(clients.results.filter((r) => r.outcome === 'ok').map((r) => r.conn)).size >= KEEP_ALIVE_CLIENTS, { timeoutMs: 3000 });
      // Sent again if seen read too late for every signal of the round to find it unfinished (shared/fresh-inflight.js).
      const freshMs = (SLOW_MS * 3) / 4 - (round.gapMs ?? 0);
      const slow = await startFreshKeepAliveInFlight(ctx, SLOW, { timeoutMs: 8000, then: '/', outliveStep: true, freshMs });
      ctx.onTeardown(() => slow.stop());
      ctx.log(`${KEEP_ALIVE_CLIENTS} keep-alive clients running; ${SLOW} in flight on worker ${slow.pid ?? '?'}${slow.readMs === null ? '' : ` (read after ${slow.readMs} ms)`}`);
      const victim = key === 'killed-worker' ? (workers.find((pid) => pid !== slow.pid) ?? workers[0]) : undefined;
      watch.sent();
      await round.send(ctx, victim);
      const state = { watch, clients, slow, victim, killedAt: victim ? watch.signalAt : undefined };
      ctx.data[key] = state;
      // The next round needs a fresh start: let it boot while this one drains.
      await ctx.prestart();
      const r = await slow.result;
      state.slowResult = r;
      if (r.outcome === 'ok' && r.status === 200 && r.pid !== undefined) {
        ctx.log(`${SLOW} completed with 200 from worker ${r.pid}, ${Math.round(r.end - watch.signalAt)} ms after the signal`);
        return;
      }
      const exit = await ctx.program.waitForExit(1000);
      const quickExit = exit && performance.now() - watch.signalAt < 1000;
      // Whether the primary left workers behind when it exited, or they were gone first.
      const leftWorkers = exit ? (await watch.atExit).survivors.length > 0 : false;
      let explanation;
      let hint;
      if (exit?.signal === round.signal) {
        explanation = `The primary has no ${round.signal} handler, so ${round.signal} ended it at once. Its workers lost their channel to the primary and exited on the spot, dropping the request.`;
        hint = `in the primary, process.on('${round.signal}', shutdown), where shutdown calls worker.disconnect() for every worker.`;
      } else if (round.group && ctx.data.sigterm?.slowResult?.outcome === 'ok') {
        // SIGTERM to the primary alone passed with the same program: its drain
        // works, so what differs is that the signal reached the workers too.
        explanation = `${round.reach}, the workers too, not only to the primary. A worker with no handler of its own for ${round.signal} dies at once, before the primary can drain it${key === 'sigint' ? ' (so does one whose handler was installed with process.once: the second Ctrl-C finds none)' : ''}.`;
        hint = `in the workers, process.on('${round.signal}', () => {}) (on, not once; and SIGTERM as well as SIGINT): the primary decides when a worker stops (worker.disconnect()).`;
      } else if (exit && !exit.signal && exit.code !== 0 && unhandledWorkerError(ctx)) {
        explanation = `The primary crashed (exit code ${exit.code}) on an 'error' event of a worker that nobody listened for (its output below): disconnecting or messaging a worker that has just died emits 'error' (EPIPE, channel closed) on it. A worker whose primary is gone before it was told to disconnect exits at once, dropping its requests.`;
        hint = "worker.on('error', (err) => console.error(err.message)) on every worker you fork.";
      } else if (quickExit && leftWorkers) {
        explanation = `The primary ${describeExit(exit)} right after the signal, without waiting for its workers: killing the workers (worker.kill(), process.kill) or exiting the primary ends their requests mid-way.`;
        hint = "call worker.disconnect() (not kill) on every worker and exit the primary only in the 'exit' handler of the last one.";
      } else if (r.outcome === 'cut') {
        explanation = 'The answer had begun when the connection was closed: something ended the worker or its connections (server.closeAllConnections(), a kill) before the request was done.';
        hint = 'end connections only at the time limit; until then let the requests in flight finish.';
      } else {
        explanation =
          'The request\'s connection closed with no answer: the worker ended it instead of finishing it. Possible causes: server.closeAllConnections() at the start of the shutdown (it cuts requests in flight; it belongs at the time limit), process.exit() or a kill in the worker, or the primary killing the workers (worker.kill(), process.kill) instead of disconnecting them.';
        hint = 'worker.disconnect() from the primary drains a worker: it closes the server and exits once its requests are done. server.closeAllConnections() only at SHUTDOWN_TIMEOUT.';
      }
      ctx.fail(`The ${SLOW} request in flight ${r.outcome === 'ok' ? `got status ${r.status}` : r.outcome === 'cut' ? 'was cut after its answer began' : 'was dropped'} when ${round.what} arrived.`, {
        expected: 'status 200 with {"pid":...}: the request finishes, then the worker stops',
        actual: `${r.outcome === 'ok' ? `status ${r.status}` : `${r.outcome} (${r.code ?? 'no answer'})`}; the primary ${describeExit(exit)}`,
        explanation,
        reproduce: [`${ctx.curl(SLOW)} &`, round.kill(ctx, state.victim)],
        hint,
        showOutput: true,
      });
    },
  };
}

/** Step 2 of a round: no worker is forked after the signal. */
function noRespawnStep(key) {
  const round = ROUNDS[key];
  return {
    id: `${key}-no-respawn`,
    title: `no worker is forked after ${round.what}`,
    async run(ctx) {
      const { watch } = ctx.data[key];
      await exitWithinDeadline(watch);
      watch.workers.stop();
      const forked = watch.workers.newPids();
      // With a worker killed at the signal, the primary may learn of the
      // death before it handles SIGTERM (the order is the kernel's and
      // libuv's, not the program's): one replacement for it is no mistake.
      const allowed = key === 'killed-worker' ? 1 : 0;
      if (forked.length > allowed) {
        ctx.fail(`The primary forked ${forked.length} new worker${forked.length === 1 ? '' : 's'} during the shutdown (${forked.join(', ')}).`, {
          expected: `no new worker after ${round.signal}; the workers ${watch.initial.join(', ')} finish and exit`,
          actual: `new workers ${forked.join(', ')}; the primary ${describeExit(ctx.program.exit)}`,
          explanation:
            `The 'exit' handler from the respawn lesson replaces every worker that exits, including the ones the shutdown is stopping${key === 'killed-worker' ? ' and one that died during it' : ''}, so the cluster never empties and the primary never gets to exit.`,
          reproduce: [round.kill(ctx, ctx.data[key].victim), `pgrep -P ${ctx.primaryPid}   # new pids appear`],
          hint:
            key === 'killed-worker'
              ? "set a flag (shuttingDown = true) in the signal handler and do not fork in 'exit' while it is set, whatever the worker died of."
              : "set a flag (shuttingDown = true) in the signal handler and do not fork in 'exit' while it is set (or check worker.exitedAfterDisconnect).",
          showOutput: true,
        });
      }
      ctx.log(`no new worker after ${round.signal} (${watch.workers.samples} samples of the process table)`);
    },
  };
}

/** Step 3 of a round: the keep-alive clients were drained, not cut. */
function drainsStep(key) {
  const round = ROUNDS[key];
  return {
    id: `${key}-drains`,
    title: `keep-alive clients are drained: no response cut, none unanswered, no worker serving them ${DRAIN_MS / 1000} s after the signal`,
    async run(ctx) {
      const { watch, clients, slow, victim, killedAt } = ctx.data[key];
      const atExit = await exitWithinDeadline(watch);
      const results = [...(await clients.stop()), ...(await slow.stop()).slice(1)];
      const c = classifyKeepAlive(results, {
        stoppedAt: watch.signalAt,
        // Requests lost with the worker the verifier killed are not the program's.
        excuse: (r, lastPid) => victim !== undefined && lastPid === victim && r.end >= killedAt,
      });
      ctx.log(summarizeKeepAlive(results, c));
      // A primary that left its workers behind is the exits step's finding.
      if (atExit?.lingering.length) {
        ctx.log('the primary exited before its workers: the next step says so');
        return;
      }
      // A server that still takes new connections was never told to stop:
      // its clients are not the finding; the exits step says what is.
      if (!ctx.program.exited) {
        const fresh = await ctx.request('/', { timeoutMs: 1000 });
        if (fresh.ok && watch.initial.includes(fresh.pid)) {
          ctx.data[key].stillListening = { pid: fresh.pid, ms: Math.round(performance.now() - watch.signalAt) };
          ctx.log(`worker ${fresh.pid} still takes new connections ${Math.round(performance.now() - watch.signalAt)} ms after the signal: it was never told to stop (the next steps say more)`);
          return;
        }
      }
      const retired = new Map(watch.initial.filter((pid) => pid !== victim).map((pid) => [pid, watch.signalAt]));
      const lingering = lingeringWorkers(results, retired);
      if (lingering.length) {
        const f = lingeringFailure(lingering[0], { what: round.signal === 'SIGINT' ? 'Ctrl-C' : round.signal, all: lingering });
        ctx.fail(f.message, {
          ...f,
          reproduce: [
            `curl -s ${quoted(ctx, '/slow?ms=3000')} ${quoted(ctx, '/?[1-2000]')} -w '\\n' &   # one connection, reused: curl sends the URLs one after the other`,
            round.kill(ctx, victim),
          ],
          showOutput: true,
        });
      }
      const problems = describeKeepAliveFailures(c);
      if (problems) {
        const f = cutOnShutdownFailure(problems);
        ctx.fail(f.message, { ...f, showOutput: true });
      }
      ctx.log(`no worker served a keep-alive client later than ${DRAIN_MS / 1000} s after the signal (plus its requests in flight)`);
    },
  };
}

function quoted(ctx, path) {
  return `'http://127.0.0.1:${ctx.port}${path}'`;
}

/** Step 4 of a round: exit code 0 within 5 s, after the workers, nothing left. */
function exitsStep(key) {
  const round = ROUNDS[key];
  return {
    id: `${key}-exits`,
    title: `the primary exits with code 0 within ${EXIT_DEADLINE_MS / 1000} s, after its workers, leaving nothing`,
    async run(ctx) {
      const { watch, victim, stillListening } = ctx.data[key];
      await judgeExit(ctx, round, { watch, victim, stillListening });
    },
  };
}

/**
 * Fails unless the primary exits with code 0 within 5 s of the signal, after
 * its workers, leaving nothing. `again` names a repeated killed-worker start.
 */
async function judgeExit(ctx, round, { watch, victim, stillListening, again }) {
  const signalCommand = round.kill(ctx, victim) + (again ? '   # the order varies: it may take a few tries' : '');
  const atExit = await exitWithinDeadline(watch);
  if (!atExit) {
    const workers = ctx.workers();
    if (stillListening && workers.length) {
      ctx.fail(`The primary was still running ${EXIT_DEADLINE_MS / 1000} s after ${round.what}, and worker ${stillListening.pid} still took new connections ${(stillListening.ms / 1000).toFixed(1)} s after it.`, {
        expected: 'every worker stops accepting connections at once (worker.disconnect()), finishes its requests and exits; then the primary exits',
        actual: `the primary and ${workers.length} workers (${workers.join(', ')}) still running; a new connection answered by ${stillListening.pid}`,
        explanation:
          "The workers still take new connections: nothing has closed their server yet. worker.kill() and worker.process.kill() only send a signal (SIGTERM by default), and what a worker does with it is up to its own handler: the contract asks workers to ignore it, and a library may wait before it closes anything. worker.disconnect() from the primary closes a worker's server at once and lets it drain.",
        reproduce: [signalCommand, ctx.curl('/') + '   # still answered'],
        hint: 'call worker.disconnect() on every worker in the shutdown; kill only at the time limit, with SIGKILL.',
        showOutput: true,
      });
    }
    ctx.fail(`The primary was still running ${EXIT_DEADLINE_MS / 1000} s after ${round.what}${again ?? ''}.`, {
      expected: again ? 'the primary exits once its workers have finished (at once here: no request is in flight)' : `the primary exits once its workers have finished (about 1 s here: the ${SLOW} request)`,
      actual: workers.length ? `the primary and ${workers.length} workers (${workers.join(', ')}) still running` : 'all workers are gone, but the primary still runs',
      explanation: workers.length
        ? 'Workers that are told to disconnect close their server and exit once their connections have ended. These did not: were they told (worker.disconnect() for each)? A timer or interval in the worker that is not unref()\'d also keeps it alive.'
        : victim !== undefined
          ? "The worker killed during the shutdown never reached your count of live workers' end: count exits, not disconnects, and remove every worker in cluster.on('exit')."
          : "Nothing ends the primary when its last worker exits: a timer or another handle keeps it alive. Call process.exit(0) in the 'exit' handler once no worker is left.",
      reproduce: [signalCommand, `pgrep -g ${ctx.primaryPid}   # processes of the group`],
      hint: "count the live workers; in cluster.on('exit') during shutdown, process.exit(0) when the count reaches 0.",
      showOutput: true,
    });
  }
  const { exit, exitAt, lingering: stayed } = atExit;
  const tookMs = Math.round(exitAt - watch.signalAt);
  if (exit.signal || exit.code !== 0) {
    const crashed = !exit.signal && unhandledWorkerError(ctx);
    ctx.fail(`The primary ${describeExit(exit)} after ${round.what}${again ?? ''}.`, {
      expected: 'exit code 0: a requested, clean stop',
      actual: describeExit(exit),
      explanation: exit.signal
        ? `The signal ended the primary: it has no ${round.signal} handler of its own.`
        : crashed
          ? "The primary crashed on an 'error' event of a worker that nobody listened for: disconnecting or messaging a worker that has just died emits 'error' (EPIPE, channel closed) on it."
          : 'A non-zero code tells a supervisor (systemd, Docker, Kubernetes) the service failed, and it may restart it or alert. A stop that was asked for and went well exits 0.',
      reproduce: signalCommand,
      hint: crashed ? "worker.on('error', (err) => console.error(err.message)) on every worker you fork." : 'process.exit(0) once the last worker has exited.',
      showOutput: true,
    });
  }
  if (stayed.length) {
    ctx.fail(`The primary exited before its workers: ${stayed.length} ${stayed.length === 1 ? 'was' : 'were'} still running (${stayed.map((p) => p.pid).join(', ')}).`, {
      expected: 'the primary exits last, once every worker has exited',
      actual: `the primary exited ${tookMs} ms after the signal, while ${stayed.map((p) => p.pid).join(', ')} still ran`,
      explanation:
        'A supervisor (systemd, Docker, Kubernetes) treats the exit of the main process as "stopped" and kills what is left of the group, requests in flight included. The primary must wait for its workers.',
      reproduce: [signalCommand, `pgrep -g ${ctx.primaryPid}   # workers still running after the primary is gone`],
      hint: "exit in cluster.on('exit') once the last worker process is gone, not right after disconnecting them. Count live workers yourself: cluster.workers drops a worker as soon as it disconnects, before its process exits.",
    });
  }
  const left = ctx.program.processes();
  if (left.length) {
    ctx.fail(`${left.length} process${left.length === 1 ? ' was' : 'es were'} left running after the primary exited.`, {
      expected: 'no process of the program left',
      actual: left.map((p) => `${p.pid} (${p.comm})`).join(', '),
      hint: 'every worker must exit; kill the ones that do not finish within the time limit.',
    });
  }
  if (!again) ctx.log(`the primary exited with code 0, ${tookMs} ms after the signal; no process left`);
  return tookMs;
}

/**
 * The killed-worker round again, on fresh starts with no traffic. Which of
 * the two the primary handles first, SIGTERM or the death, is decided by
 * which of its threads runs first when it resumes; no verifier that runs
 * `node <file>` can choose (docs/races.md). A primary that crashes only in
 * one order crashes in about 2 runs of 3, so the round is repeated: six runs
 * all miss it about 1 time in 300 or fewer.
 */
const KILLED_WORKER_AGAIN = 5;
const killedWorkerAgainStep = {
  id: 'killed-worker-again',
  title: `the same, ${KILLED_WORKER_AGAIN} more times on fresh starts: the primary exits 0 whichever it learns of first, the SIGTERM or the death`,
  timeoutMs: 20000 + KILLED_WORKER_AGAIN * 8000,
  async run(ctx) {
    const round = ROUNDS['killed-worker'];
    for (let i = 1; i <= KILLED_WORKER_AGAIN; i++) {
      await ctx.start();
      const workers = await countWorkers(ctx, WORKERS);
      const watch = watchShutdown(ctx, round.signal);
      const victim = workers[workers.length - 1];
      watch.sent();
      await round.send(ctx, victim);
      // The next start boots while this one stops (the last one is the time-limit round's).
      await ctx.prestart();
      const again = ` (on repeat ${i} of ${KILLED_WORKER_AGAIN}; what varies from run to run is whether the primary handles the SIGTERM or the death first)`;
      const tookMs = await judgeExit(ctx, round, { watch, victim, again });
      ctx.log(`start ${i} of ${KILLED_WORKER_AGAIN}: the primary exited with code 0, ${tookMs} ms after the signal`);
    }
  },
};

/**
 * The last round begins: a request that outlives the limit is in flight at
 * SIGTERM, so for seconds the shutdown is under way while a worker is busy.
 * In those seconds the program must refuse new connections (why the clients
 * of the other rounds cannot see it: verify/shared/stops-accepting.js).
 */
const stopsAcceptingStep = {
  id: 'stops-accepting',
  title: `round 5: with a request that never finishes in flight, new connections are refused within ${STOP_ACCEPTING_MS / 1000} s of SIGTERM`,
  timeoutMs: 30000,
  async run(ctx) {
    ctx.log('starting again for the time-limit round');
    await ctx.start();
    await countWorkers(ctx, WORKERS);
    const watch = watchShutdown(ctx, 'SIGTERM');
    const stuck = await startKeepAliveInFlight(ctx, STUCK, { timeoutMs: 20000 });
    const holder = stuck.pid;
    ctx.log(`${STUCK} in flight on worker ${holder ?? '?'}`);
    ctx.signalPrimary('SIGTERM');
    watch.sent();
    ctx.data.limitRound = { watch, holder };
    const seen = await watchStopsAccepting(ctx, { withinMs: STOP_ACCEPTING_MS });
    if (!seen.refused) {
      const f = stillAcceptingFailure({ port: ctx.port, withinMs: STOP_ACCEPTING_MS, accepted: seen.accepted, signal: 'SIGTERM', inFlight: STUCK });
      ctx.fail(f.message, {
        ...f,
        reproduce: [`${ctx.curl(STUCK)} &`, `kill -TERM ${ctx.primaryPid}; sleep 1`, `curl -s http://127.0.0.1:${ctx.port}/   # refused: "Failed to connect"`],
        showOutput: true,
      });
    }
    ctx.log(`new connections refused ${seen.ms} ms after SIGTERM, with ${STUCK} still in flight`);
  },
};

/** The last round goes on: the limit ends the request that outlives it. */
const timeLimitStep = {
  id: 'time-limit',
  title: `a request still running at SHUTDOWN_TIMEOUT=${SHUTDOWN_TIMEOUT}: its worker is gone within ${(SHUTDOWN_TIMEOUT + LIMIT_SLACK_MS) / 1000} s and the primary exits 0`,
  timeoutMs: 30000,
  async run(ctx) {
    const { watch, holder } = ctx.data.limitRound;
    const reproduce = [`${ctx.curl(STUCK)} &`, `kill -TERM ${ctx.primaryPid}`, `pgrep -P ${ctx.primaryPid}   # ${SHUTDOWN_TIMEOUT / 1000} s later: none`];
    let goneAt = null;
    if (holder !== undefined) {
      const gone = await ctx.poll(() => !isAlive(holder), { timeoutMs: SHUTDOWN_TIMEOUT + LIMIT_SLACK_MS, intervalMs: 25 });
      if (gone.ok) goneAt = performance.now();
    }
    const sinceSignal = (t) => Math.round(t - watch.signalAt);
    if (holder !== undefined && goneAt === null) {
      ctx.fail(`Worker ${holder} was still alive ${(SHUTDOWN_TIMEOUT + LIMIT_SLACK_MS) / 1000} s after SIGTERM, with a request that never finishes in flight.`, {
        expected: `a worker that is not done at SHUTDOWN_TIMEOUT (${SHUTDOWN_TIMEOUT} ms here) ends its connections (server.closeAllConnections()) or is killed (SIGKILL) by the primary`,
        actual: `worker ${holder} still running; the primary ${describeExit(ctx.program.exit)}`,
        explanation:
          'Without a time limit, or with one longer than SHUTDOWN_TIMEOUT (a fixed 10 s or 30 s written into the program, a library default), one request that never ends holds the whole shutdown until the supervisor loses patience and kills everything. The limit is SHUTDOWN_TIMEOUT, read from the environment.',
        reproduce,
        hint: `read Number(process.env.SHUTDOWN_TIMEOUT) || 10000; in the primary, setTimeout(() => worker.process.kill('SIGKILL'), SHUTDOWN_TIMEOUT + 500).unref() per worker at shutdown; in the worker, server.closeAllConnections() at SHUTDOWN_TIMEOUT.`,
        showOutput: true,
      });
    }
    if (goneAt !== null && sinceSignal(goneAt) < SHUTDOWN_TIMEOUT - LIMIT_EARLY_MS) {
      ctx.fail(`Worker ${holder} was ended ${sinceSignal(goneAt)} ms after SIGTERM, before the time limit of ${SHUTDOWN_TIMEOUT} ms.`, {
        expected: `the request runs until SHUTDOWN_TIMEOUT (${SHUTDOWN_TIMEOUT} ms), then the worker is stopped`,
        actual: `worker ${holder} gone ${sinceSignal(goneAt)} ms after the signal`,
        explanation: 'A limit shorter than the stated one cuts requests that would have finished in time.',
        reproduce,
        hint: 'use SHUTDOWN_TIMEOUT from the environment for the limit.',
        showOutput: true,
      });
    }
    const exit = await ctx.program.waitForExit(holder === undefined ? SHUTDOWN_TIMEOUT + LIMIT_SLACK_MS : 1000);
    if (!exit) {
      ctx.fail(`The primary was still running 1 s after its last worker was stopped at the time limit.`, {
        expected: 'the primary exits with code 0 once every worker has exited, the killed one included',
        actual: `the primary still running; workers: ${ctx.workers().join(', ') || 'none'}`,
        explanation: "A worker killed at the time limit still emits 'exit' in the primary: count it as gone like the others.",
        reproduce,
        hint: "process.exit(0) in cluster.on('exit') once no worker is left, whatever the worker's exit code or signal.",
        showOutput: true,
      });
    }
    if (exit.signal || exit.code !== 0) {
      ctx.fail(`The primary ${describeExit(exit)} after stopping a worker at the time limit.`, {
        expected: 'exit code 0: the shutdown was asked for, and the limit is part of it',
        actual: describeExit(exit),
        explanation: exit.signal
          ? 'The signal ended the primary: it has no SIGTERM handler of its own.'
          : "Killing a worker at the limit is part of a clean shutdown: the primary still exits 0 (a code such as 1 tells the supervisor the service failed).",
        reproduce,
        hint: 'process.exit(0) once the last worker has exited.',
        showOutput: true,
      });
    }
    watch.workers.stop();
    const forked = watch.workers.newPids();
    if (forked.length) {
      ctx.fail(`The primary forked ${forked.length} new worker${forked.length === 1 ? '' : 's'} when the time limit stopped a worker.`, {
        expected: 'no new worker after SIGTERM, the one killed at the limit included',
        actual: `new workers ${forked.join(', ')}`,
        hint: "do not fork in cluster.on('exit') while shutting down, whatever the worker died of.",
        showOutput: true,
      });
    }
    const left = ctx.program.processes();
    if (left.length) {
      ctx.fail(`${left.length} process${left.length === 1 ? ' was' : 'es were'} left running after the primary exited.`, {
        expected: 'no process of the program left',
        actual: left.map((p) => `${p.pid} (${p.comm})`).join(', '),
        hint: 'every worker must exit; kill the ones that do not finish within the time limit.',
      });
    }
    ctx.log(`worker ${holder} stopped ${goneAt === null ? '' : `${sinceSignal(goneAt)} ms `}after SIGTERM; the primary exited with code 0`);
  },
};

export default {
  env: { WORKERS: String(WORKERS), SHUTDOWN_TIMEOUT: String(SHUTDOWN_TIMEOUT) },
  steps: [...ORDER.flatMap((key) => [inFlightStep(key), noRespawnStep(key), drainsStep(key), exitsStep(key)]), killedWorkerAgainStep, stopsAcceptingStep, timeLimitStep],
};

/** The state letter of a process (R, S, T, Z...), from /proc; null when unknown. */
function processState(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[0];
  } catch {
    return null;
  }
}
