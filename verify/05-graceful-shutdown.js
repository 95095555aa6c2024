// Lesson 5 (graceful-shutdown): twice, once with SIGTERM to the primary and
// once, on a fresh start, with SIGINT to the whole process group (Ctrl-C): a
// /slow?ms=1000 request in flight completes with 200, no worker is forked
// after the signal, and the primary exits with code 0 within 5 s, after its
// workers, leaving no process behind.
import { countWorkers } from './shared/workers.js';
import { startInFlight } from './shared/inflight.js';
import { watchShutdown, exitWithinDeadline, EXIT_DEADLINE_MS } from './shared/shutdown.js';
import { describeResult } from '../lib/harness/http.js';

const WORKERS = 3;
const SLOW = '/slow?ms=1000';

const ROUNDS = {
  sigterm: {
    signal: 'SIGTERM',
    what: 'SIGTERM to the primary',
    send: (ctx) => ctx.signalPrimary('SIGTERM'),
    kill: (ctx) => `kill -TERM ${ctx.primaryPid}`,
  },
  sigint: {
    signal: 'SIGINT',
    what: 'SIGINT to the whole group (Ctrl-C)',
    send: (ctx) => ctx.signalGroup('SIGINT'),
    kill: (ctx) => `kill -INT -${ctx.primaryPid}   # or Ctrl-C in the terminal that runs it`,
  },
};

function describeExit(exit) {
  if (!exit) return 'still running';
  return exit.signal ? `killed by ${exit.signal}` : `exited with code ${exit.code}`;
}

/** Step 1 of a round: a /slow request in flight when the signal comes completes with 200. */
function inFlightStep(key) {
  const round = ROUNDS[key];
  return {
    id: `${key}-in-flight`,
    title: `${round.what}: a ${SLOW} request in flight completes with 200`,
    // The Ctrl-C round starts the program again: room for a slow start-up.
    timeoutMs: key === 'sigint' ? 30000 : 15000,
    async run(ctx) {
      if (key === 'sigint') {
        ctx.log('starting again for the Ctrl-C round');
        await ctx.start();
      }
      await countWorkers(ctx, WORKERS, { wrongHint: 'fork Number(process.env.WORKERS) workers (lesson 2).' });
      const watch = watchShutdown(ctx, round.signal);
      ctx.data[key] = watch;
      const slow = await startInFlight(ctx, SLOW, { timeoutMs: 8000 });
      ctx.log(`${SLOW} is in flight${slow.readMs === null ? '' : ` (a worker read it after ${slow.readMs} ms)`}`);
      round.send(ctx);
      watch.sent();
      // The Ctrl-C round needs a fresh start: let it boot while this one
      // drains (a timer-bound second), instead of after.
      if (key === 'sigterm') await ctx.prestart();
      const r = await slow.result;
      if (r.ok && r.status === 200 && r.pid !== undefined) {
        ctx.log(`${SLOW} completed with 200 from worker ${r.pid}, ${Math.round(performance.now() - watch.signalAt)} ms after the signal`);
        return;
      }
      // What the primary did tells the likely cause apart.
      const exit = await ctx.program.waitForExit(1000);
      const quickExit = exit && performance.now() - watch.signalAt < 1000;
      let explanation;
      let hint;
      if (exit?.signal === round.signal) {
        explanation = `The primary has no ${round.signal} handler, so ${round.signal} ended it at once. Its workers lost their channel to the primary and exited on the spot, dropping the request.`;
        hint = `in the primary, process.on('${round.signal}', shutdown), where shutdown calls worker.disconnect() for every worker.`;
      } else if (key === 'sigint') {
        // The SIGTERM round passed with the same program: its drain works, so
        // what differs is that the signal reached the workers too.
        explanation =
          'Ctrl-C sends SIGINT to every process of the group, the workers too, not only to the primary. A worker without a SIGINT handler dies at once, before the primary can drain it.';
        hint = "in the workers, process.on('SIGINT', () => {}): the primary decides when a worker stops (worker.disconnect()).";
      } else if (quickExit) {
        explanation = `The primary ${describeExit(exit)} right after the signal, without waiting for its workers: killing the workers (worker.kill(), process.kill) or exiting the primary ends their requests mid-way.`;
        hint = "call worker.disconnect() (not kill) on every worker and exit the primary only in the 'exit' handler of the last one.";
      } else {
        explanation = 'The worker dropped the request instead of finishing it. worker.disconnect() lets a worker finish: it closes the server and exits once the requests it has are done.';
        hint = 'do not kill the workers or call process.exit in them on a signal: worker.disconnect() from the primary drains them.';
      }
      ctx.fail(`The ${SLOW} request in flight ${r.ok ? `got status ${r.status}` : 'was dropped'} when ${round.what} arrived.`, {
        expected: 'status 200 with {"pid":...}: the request finishes, then the worker stops',
        actual: `${describeResult(r)}; the primary ${describeExit(exit)}`,
        explanation,
        reproduce: [`${ctx.curl(SLOW)} &`, round.kill(ctx)],
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
    title: `no worker is forked after ${round.signal}`,
    async run(ctx) {
      const watch = ctx.data[key];
      await exitWithinDeadline(watch);
      watch.workers.stop();
      const forked = watch.workers.newPids();
      if (forked.length) {
        ctx.fail(`The primary forked ${forked.length} new worker${forked.length === 1 ? '' : 's'} during the shutdown (${forked.join(', ')}).`, {
          expected: `no new worker after ${round.signal}; the workers ${watch.initial.join(', ')} finish and exit`,
          actual: `new workers ${forked.join(', ')}; the primary ${describeExit(ctx.program.exit)}`,
          explanation:
            "The 'exit' handler from lesson 3 replaces every worker that exits, including the ones the shutdown is stopping, so the cluster never empties and the primary never gets to exit.",
          reproduce: [round.kill(ctx), `pgrep -P ${ctx.primaryPid}   # new pids appear`],
          hint: "set a flag (shuttingDown = true) in the signal handler and do not fork in 'exit' while it is set (or check worker.exitedAfterDisconnect).",
          showOutput: true,
        });
      }
      ctx.log(`no new worker after ${round.signal} (${watch.workers.samples} samples of the process table)`);
    },
  };
}

/** Step 3 of a round: exit code 0 within 5 s, after the workers, nothing left. */
function exitsStep(key) {
  const round = ROUNDS[key];
  return {
    id: `${key}-exits`,
    title: `the primary exits with code 0 within ${EXIT_DEADLINE_MS / 1000} s, after its workers, leaving nothing`,
    async run(ctx) {
      const watch = ctx.data[key];
      const atExit = await exitWithinDeadline(watch);
      if (!atExit) {
        const workers = ctx.workers();
        ctx.fail(`The primary was still running ${EXIT_DEADLINE_MS / 1000} s after ${round.signal}.`, {
          expected: `the primary exits once its workers have finished (about 1 s here: the ${SLOW} request)`,
          actual: workers.length ? `the primary and ${workers.length} workers (${workers.join(', ')}) still running` : 'all workers are gone, but the primary still runs',
          explanation: workers.length
            ? 'Workers that are told to disconnect close their server and exit once their requests are done. These did not: were they told (worker.disconnect() for each)?'
            : "Nothing ends the primary when its last worker exits: a timer or another handle keeps it alive. Call process.exit(0) in the 'exit' handler once no worker is left.",
          reproduce: [round.kill(ctx), `pgrep -g ${ctx.primaryPid}   # processes of the group`],
          hint: "count the live workers; in cluster.on('exit') during shutdown, process.exit(0) when the count reaches 0.",
          showOutput: true,
        });
      }
      const { exit, exitAt, lingering: stayed } = atExit;
      const tookMs = Math.round(exitAt - watch.signalAt);
      if (exit.signal || exit.code !== 0) {
        ctx.fail(`The primary ${describeExit(exit)} after ${round.signal}.`, {
          expected: 'exit code 0: a requested, clean stop',
          actual: describeExit(exit),
          explanation: exit.signal
            ? `The signal ended the primary: it has no ${round.signal} handler of its own.`
            : 'A non-zero code tells a supervisor (systemd, Docker, Kubernetes) the service failed, and it may restart it or alert. A stop that was asked for and went well exits 0.',
          hint: 'process.exit(0) once the last worker has exited.',
          showOutput: true,
        });
      }
      if (stayed.length) {
        ctx.fail(`The primary exited before its workers: ${stayed.length} ${stayed.length === 1 ? 'was' : 'were'} still running (${stayed.map((p) => p.pid).join(', ')}).`, {
          expected: 'the primary exits last, once every worker has exited',
          actual: `the primary exited ${tookMs} ms after the signal, while ${stayed.map((p) => p.pid).join(', ')} still ran`,
          explanation:
            'A supervisor (systemd, Docker, Kubernetes) treats the exit of the main process as "stopped" and kills what is left of the group, requests in flight included. The primary must wait for its workers.',
          reproduce: [round.kill(ctx), `pgrep -g ${ctx.primaryPid}   # workers still running after the primary is gone`],
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
      ctx.log(`the primary exited with code 0, ${tookMs} ms after ${round.signal}; no process left`);
    },
  };
}

export default {
  env: { WORKERS: String(WORKERS) },
  steps: [
    inFlightStep('sigterm'),
    noRespawnStep('sigterm'),
    exitsStep('sigterm'),
    inFlightStep('sigint'),
    noRespawnStep('sigint'),
    exitsStep('sigint'),
  ],
};
