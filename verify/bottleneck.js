// The bottleneck lesson (bottleneck): a single process whose /heavy burns the CPU, and the
// proof that while it burns, nothing else is answered.
import { request } from '../lib/harness/http.js';
import { measureThroughput } from '../lib/harness/throughput.js';
import { cpuSeconds } from '../lib/harness/processes.js';

const HEAVY_MS = 600;
// /heavy must burn the CPU, not sleep: of the time it runs, the process must
// have used at least this share of one CPU. A busy loop gets its share of the
// machine (half a core beside 2 CPU hogs on 2 cores, a tenth under a load of
// 20); a sleep (Atomics.wait) gets none.
const MIN_CPU_SHARE = 0.05;

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
          ctx.fail('This lesson is a single process; clustering is the fork lesson.', {
            expected: 'no worker processes',
            actual: `the primary forked ${workers.length} worker(s): ${workers.join(', ')}`,
            hint: 'remove cluster.fork() for now: the bottleneck lesson measures what one process can do.',
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
        const cpuBefore = cpuSeconds(ctx.primaryPid);
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
        const cpuMs = Math.round((cpuSeconds(ctx.primaryPid) - cpuBefore) * 1000);
        ctx.expectJson(h);
        ctx.log(`/heavy?ms=${HEAVY_MS} took ${h.ms} ms; GET / answered ${answeredDuring.length} time(s) meanwhile`);
        if (answeredDuring.length > 0) {
          ctx.fail(`GET / was answered while /heavy?ms=${HEAVY_MS} was still running.`, {
            expected: 'GET / answered only after /heavy finishes: one thread cannot do two things at once',
            actual: `GET / answered ${answeredDuring.length} time(s) during /heavy (first after ${answeredDuring[0]} ms)`,
            explanation:
              'Your /heavy does not hold the event loop. The usual causes: it waits on a timer (setTimeout) or a promise; or it hands the work to another thread (the asynchronous crypto.pbkdf2 or scrypt run on libuv\'s thread pool, a worker_threads Worker). Meanwhile the event loop is free to answer other requests, so nothing is blocked. A synchronous loop keeps the one thread busy, which is what a CPU-heavy request on the main thread really does.',
            reproduce: [`${ctx.curl(`/heavy?ms=${HEAVY_MS}`)} &`, `time ${ctx.curl('/')}`],
            hint: 'replace the timer with a busy loop: const end = Date.now() + ms; while (Date.now() < end) {}',
          });
        }
        if (process.platform === 'linux' && cpuMs < MIN_CPU_SHARE * h.ms) {
          ctx.fail(`GET /heavy?ms=${HEAVY_MS} blocked the process, but it hardly used the CPU: ${cpuMs} ms of CPU in ${h.ms} ms.`, {
            expected: `a busy loop: at least ${Math.round(MIN_CPU_SHARE * 100)}% of one CPU while /heavy runs (a busy loop gets its share of the machine however loaded it is)`,
            actual: `${cpuMs} ms of CPU time (user + system, from /proc/${ctx.primaryPid}/stat) over ${h.ms} ms`,
            explanation:
              'The process was blocked, but asleep: a synchronous sleep (Atomics.wait, execSync of sleep) holds the event loop without doing any work. /heavy stands for CPU work, such as hashing a password: the next lessons share that work between processes and cores, which a sleep does not need.',
            reproduce: [`${ctx.curl(`/heavy?ms=${HEAVY_MS}`)} &`, `top -p ${ctx.primaryPid}   # a busy loop shows near 100% CPU`],
            hint: 'burn the CPU: const end = Date.now() + ms; while (Date.now() < end) {}',
          });
        }
        ctx.log(`the process used ${cpuMs} ms of CPU during /heavy`);
      },
    },
    {
      id: 'throughput',
      title: 'throughput of /heavy?ms=20 (measured, kept for the fork lesson)',
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
