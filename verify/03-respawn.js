// Lesson 3 (respawn): every worker that dies, killed or crashed, is replaced
// by exactly one new worker within 2 s, requests keep succeeding meanwhile,
// and the primary keeps its pid throughout.
import { request } from '../lib/harness/http.js';
import { isReaped } from '../lib/harness/processes.js';
import { failed, summarizeFailures } from '../lib/harness/load.js';
import { countWorkers, expectPrimaryAlive, failReplacementsDying, failTooMany, waitForReplacement } from './shared/workers.js';

const WORKERS = 3;

export default {
  env: { WORKERS: String(WORKERS) },
  steps: [
    {
      id: 'worker-count',
      title: `the primary has exactly ${WORKERS} workers`,
      async run(ctx) {
        ctx.data.primaryPid = ctx.primaryPid;
        await countWorkers(ctx, WORKERS, { wrongHint: 'fork Number(process.env.WORKERS) workers (lesson 2).' });
      },
    },
    {
      id: 'replaces-killed',
      title: 'a SIGKILLed worker is replaced within 2 s, and the count stays 3',
      async run(ctx) {
        const before = ctx.workers();
        const [victim] = before;
        const load = ctx.startLoad({ concurrency: 2, timeoutMs: 3000 });
        ctx.killWorker(victim, 'SIGKILL');
        // The primary has seen the death once it reaped the process (a dead
        // worker stays a zombie until then, and until then Node's cluster may
        // still hand it a connection, which is lost: no program can prevent
        // that). From then on no connection may fail.
        const gone = await ctx.poll(() => isReaped(victim), { timeoutMs: 2000, intervalMs: 5 });
        const goneAt = performance.now();
        const fresh = await waitForReplacement(ctx, WORKERS, [victim], { before });
        ctx.log(`worker ${victim} replaced by ${fresh.join(', ')} (${gone.ms} ms until the primary saw the death)`);
        // For one more second the same workers stay: a handler that forks late
        // or twice, or replacements that die and are replaced again, show here.
        const steady = ctx.workers();
        const moved = await ctx.poll(
          () => {
            const now = ctx.workers();
            return now.length !== WORKERS || now.some((pid) => !steady.includes(pid)) ? now : null;
          },
          { timeoutMs: 1000, intervalMs: 10 },
        );
        const results = await load.stop();
        if (moved.ok) {
          const vanished = steady.filter((pid) => !moved.value.includes(pid));
          if (vanished.length) failReplacementsDying(ctx, vanished);
          failTooMany(ctx, WORKERS, moved.value);
        }
        const afterDeath = results.filter((r) => r.start > goneAt);
        const bad = afterDeath.filter(failed);
        ctx.log(`${results.length} requests during the window, ${bad.length} failed after the primary saw the death`);
        if (bad.length) {
          ctx.fail(`${bad.length} of ${afterDeath.length} requests failed after the worker died.`, {
            expected: 'every request answered by the workers still alive',
            actual: summarizeFailures(afterDeath),
            showOutput: true,
          });
        }
      },
    },
    {
      id: 'replaces-crashed',
      title: 'GET /crash ends its worker, which is replaced within 2 s',
      async run(ctx) {
        const before = ctx.workers();
        const r = await request(ctx.port, '/crash', { timeoutMs: 3000, signal: ctx.signal });
        if (r.ok) {
          ctx.fail(`GET /crash answered (status ${r.status}) instead of ending the worker.`, {
            expected: 'no answer: the worker dies of an uncaught exception',
            actual: `status ${r.status}`,
            explanation:
              r.status === 500
                ? 'Express catches an error thrown inside a route handler and answers 500, so the worker survives. Throw where express cannot catch it: setImmediate(() => { throw new Error("crash") }).'
                : 'Add GET /crash: the worker that receives it throws an uncaught exception and dies.',
            reproduce: ctx.curl('/crash'),
          });
        }
        const crashed = await ctx.poll(() => before.filter((pid) => !ctx.workers().includes(pid)), { timeoutMs: 2000, intervalMs: 5 });
        if (!crashed.ok || crashed.value.length === 0) {
          ctx.fail('GET /crash got no answer, but no worker died.', {
            expected: 'the worker that received it exits',
            actual: `${r.error}; all of ${before.join(', ')} still alive`,
            reproduce: ctx.curl('/crash'),
            hint: 'throw an uncaught exception: setImmediate(() => { throw new Error("crash") }).',
          });
        }
        const fresh = await waitForReplacement(ctx, WORKERS, crashed.value, { before });
        ctx.log(`worker ${crashed.value.join(', ')} crashed; replaced by ${fresh.join(', ')}`);
      },
    },
    {
      id: 'replaces-two',
      title: 'two workers SIGKILLed at once are both replaced',
      async run(ctx) {
        const before = ctx.workers();
        const victims = before.slice(0, 2);
        for (const pid of victims) ctx.killWorker(pid, 'SIGKILL');
        const fresh = await waitForReplacement(ctx, WORKERS, victims, { what: 'a replacement for each', before });
        ctx.log(`workers ${victims.join(', ')} replaced by ${fresh.join(', ')}`);
      },
    },
    {
      id: 'steady',
      title: `the primary kept its pid and has exactly ${WORKERS} workers`,
      async run(ctx) {
        expectPrimaryAlive(ctx, 'during the test');
        if (ctx.primaryPid !== ctx.data.primaryPid) {
          ctx.fail('The primary changed.', { expected: `pid ${ctx.data.primaryPid}`, actual: `pid ${ctx.primaryPid}` });
        }
        await countWorkers(ctx, WORKERS, { wrongHint: "fork exactly one replacement per death, in the 'exit' event only." });
        const r = await ctx.get('/');
        ctx.log(`primary ${ctx.primaryPid} unchanged; GET / -> ${r.text}`);
      },
    },
  ],
};
