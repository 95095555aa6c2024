// Lesson 1 (bottleneck): a single process whose /heavy burns the CPU, and the
// proof that while it burns, nothing else is answered.
import { request } from '../lib/harness/http.js';
import { measureThroughput } from '../lib/harness/throughput.js';

const HEAVY_MS = 600;

export default {
  clustered: false,
  env: {},
  steps: [
    {
      id: 'single-process',
      title: 'is one process that answers with its own pid',
      async run(ctx) {
        const r = await ctx.get('/');
        const workers = ctx.workers();
        if (workers.length > 0) {
          ctx.fail('This lesson is a single process; clustering is lesson 2.', {
            expected: 'no worker processes',
            actual: `the primary forked ${workers.length} worker(s): ${workers.join(', ')}`,
            hint: 'remove cluster.fork() for now: lesson 1 measures what one process can do.',
          });
        }
        if (r.pid !== ctx.primaryPid) {
          ctx.fail('GET / answered with a pid that is not the process the verifier started.', {
            expected: `"pid": ${ctx.primaryPid}`,
            actual: `"pid": ${r.pid}`,
            reproduce: ctx.curl('/'),
            hint: 'answer with res.json({ pid: process.pid }).',
          });
        }
      },
    },
    {
      id: 'heavy-takes-time',
      title: 'GET /heavy?ms=300 burns about 300 ms and answers { pid, ms }',
      async run(ctx) {
        const r = await ctx.get('/heavy?ms=300', { timeoutMs: 5000 });
        ctx.log(`GET /heavy?ms=300 -> ${r.text} in ${r.ms} ms`);
        // Timers fire a millisecond or so early at worst; anything well under is no busy loop at all.
        if (r.ms < 290) {
          ctx.fail(`GET /heavy?ms=300 answered after ${r.ms} ms.`, {
            expected: 'at least 300 ms: keep the CPU busy for ms milliseconds before answering',
            actual: `${r.ms} ms`,
            reproduce: `time ${ctx.curl('/heavy?ms=300')}`,
            hint: 'loop until Date.now() has moved on by ms: const end = Date.now() + ms; while (Date.now() < end) {}',
          });
        }
        if (Number(r.json.ms) !== 300) {
          ctx.fail('GET /heavy?ms=300 did not answer the ms it was asked for.', {
            expected: '{ "pid": <pid>, "ms": 300 }',
            actual: r.text,
            reproduce: ctx.curl('/heavy?ms=300'),
          });
        }
      },
    },
    {
      id: 'heavy-blocks',
      title: `GET / waits while /heavy?ms=${HEAVY_MS} runs (the bottleneck is real)`,
      timeoutMs: 15000,
      async run(ctx) {
        // Probes go out one after another from the moment /heavy has been sent.
        // A blocked process answers none of them until /heavy is done; one that
        // waits on a timer answers them all along. The first 150 ms are left
        // out: a probe may be read before /heavy itself is.
        let heavySent;
        const heavy = request(ctx.port, `/heavy?ms=${HEAVY_MS}`, {
          timeoutMs: 10000,
          onSent: () => (heavySent = performance.now()),
        });
        let heavyDone = null;
        heavy.then(() => (heavyDone = performance.now()));
        await ctx.poll(() => heavySent !== undefined, { timeoutMs: 2000, intervalMs: 1 });

        const answeredDuring = [];
        while (heavyDone === null) {
          const probe = await ctx.request('/', { timeoutMs: 10000 });
          const at = performance.now();
          if (heavyDone === null && probe.ok && at - heavySent > 150) answeredDuring.push(Math.round(at - heavySent));
        }
        const h = await heavy;
        ctx.expectJson(h);
        ctx.log(`/heavy?ms=${HEAVY_MS} took ${h.ms} ms; GET / answered ${answeredDuring.length} time(s) meanwhile`);
        if (answeredDuring.length > 0) {
          ctx.fail(`GET / was answered while /heavy?ms=${HEAVY_MS} was still running.`, {
            expected: 'GET / answered only after /heavy finishes: one thread cannot do two things at once',
            actual: `GET / answered ${answeredDuring.length} time(s) during /heavy (first after ${answeredDuring[0]} ms)`,
            explanation:
              'Your /heavy waits without working, probably on a timer (setTimeout) or a promise. While a timer waits, the event loop is free to answer other requests, so nothing is blocked. A synchronous loop keeps the one thread busy, which is what a CPU-heavy request really does.',
            reproduce: [`${ctx.curl(`/heavy?ms=${HEAVY_MS}`)} &`, `time ${ctx.curl('/')}`],
            hint: 'replace the timer with a busy loop: const end = Date.now() + ms; while (Date.now() < end) {}',
          });
        }
      },
    },
    {
      id: 'throughput',
      title: 'throughput of /heavy?ms=20 (measured, kept for lesson 2)',
      timeoutMs: 15000,
      async run(ctx) {
        const t = await measureThroughput(ctx.port, '/heavy?ms=20', { durationS: 1, connections: 4, signal: ctx.signal });
        ctx.log(`${t.rps} requests/s on /heavy?ms=20 (p50 ${t.p50} ms, p99 ${t.p99} ms); one process can do at most about 50/s`);
        if (t.errors > 0 || t.non2xx > 0) {
          ctx.fail('Some requests failed under load.', {
            expected: 'every request answered with status 200',
            actual: `${t.errors} errors or timeouts, ${t.non2xx} non-200 answers out of ${t.requests}`,
            reproduce: `npx autocannon -c 4 -d 1 http://127.0.0.1:${ctx.port}/heavy?ms=20`,
            showOutput: true,
          });
        }
        ctx.store.set('bottleneck.rps', t.rps);
      },
    },
  ],
};
