// Lesson 2 (fork): exactly WORKERS workers, the primary serves nothing, every
// worker takes connections, a busy worker does not block the others, and the
// count follows os.availableParallelism() when WORKERS is unset.
import { availableParallelism } from 'node:os';
import { request } from '../lib/harness/http.js';
import { measureThroughput } from '../lib/harness/throughput.js';
import { countWorkers } from './shared/workers.js';

const WORKERS = 3;

export default {
  env: { WORKERS: String(WORKERS) },
  steps: [
    {
      id: 'worker-count',
      title: `the primary has exactly ${WORKERS} workers`,
      async run(ctx) {
        await countWorkers(ctx, WORKERS, {
          none: 'The primary has no worker processes.',
          noneHint: 'in the primary (cluster.isPrimary), call cluster.fork() once per worker; the workers run the server.',
          wrongHint: 'fork Number(process.env.WORKERS) workers, not a fixed number or os.cpus().length.',
        });
      },
    },
    {
      id: 'primary-serves-nothing',
      title: 'every response comes from a worker, none from the primary',
      async run(ctx) {
        const workers = ctx.workers();
        for (let i = 0; i < 12; i++) {
          const r = await ctx.get('/');
          if (r.pid === ctx.primaryPid) {
            ctx.fail('The primary answered a request itself.', {
              expected: `a pid of a worker (${workers.join(', ')})`,
              actual: `the primary's pid ${ctx.primaryPid}`,
              explanation: 'The primary should only fork and watch its workers. When it listens too, it competes with them for connections and a slow request there blocks the process that manages the cluster.',
              reproduce: ctx.curl('/'),
              hint: 'create the express app and call app.listen only in the else branch of if (cluster.isPrimary).',
            });
          }
          if (!workers.includes(r.pid)) {
            ctx.fail('A response carried a pid that is not one of the workers.', {
              expected: `one of ${workers.join(', ')}`,
              actual: `pid ${r.pid}`,
              reproduce: ctx.curl('/'),
              hint: 'answer with pid: process.pid, the pid of the process that serves the request.',
            });
          }
        }
      },
    },
    {
      id: 'all-workers-answer',
      title: `all ${WORKERS} workers answer within 60 requests`,
      async run(ctx) {
        const workers = ctx.workers();
        const { pids } = await ctx.reachWorkers('/', { count: workers.length, maxRequests: 60 });
        const silent = workers.filter((pid) => !pids.has(pid));
        ctx.log(`answers per worker: ${[...pids].map(([pid, n]) => `${pid}: ${n}`).join(', ')}`);
        if (silent.length) {
          ctx.fail(`${silent.length} of ${workers.length} workers never answered in 60 requests.`, {
            expected: `answers from every worker: ${workers.join(', ')}`,
            actual: `answers only from ${[...pids.keys()].join(', ') || 'none'}; silent: ${silent.join(', ')}`,
            explanation: 'A worker that does not call listen takes no connections: it runs, but serves nothing.',
            reproduce: `for i in $(seq 10); do ${ctx.curl('/')}; echo; done`,
            hint: 'every worker calls app.listen(process.env.PORT); the primary shares the port between them.',
          });
        }
      },
    },
    {
      id: 'throughput',
      title: 'throughput of /heavy?ms=20 compared with lesson 1 (information)',
      timeoutMs: 15000,
      async run(ctx) {
        const t = await measureThroughput(ctx.port, '/heavy?ms=20', { durationS: 0.5, connections: 2 * WORKERS, signal: ctx.signal });
        const single = ctx.store.get('bottleneck.rps');
        const ratio = single ? ` = ${(t.rps / single).toFixed(1)}x your lesson-1 figure (${single}/s)` : ' (verify lesson 1 to compare)';
        ctx.log(`${t.rps} requests/s with ${WORKERS} workers${ratio}; at most about ${Math.min(WORKERS, availableParallelism())}x on ${availableParallelism()} cores`);
        if (t.errors > 0 || t.non2xx > 0) {
          ctx.fail('Some requests failed under load.', {
            expected: 'every request answered with status 200',
            actual: `${t.errors} errors or timeouts, ${t.non2xx} non-200 answers out of ${t.requests}`,
            showOutput: true,
          });
        }
      },
    },
    {
      id: 'parallel',
      title: 'while /heavy?ms=800 runs in one worker, another answers GET /',
      async run(ctx) {
        let heavyDone = false;
        request(ctx.port, '/heavy?ms=800', { timeoutMs: 10000, signal: ctx.signal }).then(() => (heavyDone = true));
        // Round robin sends the next connections to the other workers; a few
        // tries cover a probe that lands on the busy one. The step does not
        // wait for /heavy: the next step restarts the program anyway.
        let answered;
        for (let i = 0; i < 3 && !heavyDone && !answered; i++) {
          const r = await ctx.request('/', { timeoutMs: 5000 });
          if (r.ok && !heavyDone) answered = r;
        }
        if (!answered) {
          ctx.fail('GET / had to wait for /heavy to finish.', {
            expected: 'GET / answered by another worker while /heavy?ms=800 runs (typically within 200 ms)',
            actual: 'no answer until /heavy was done',
            explanation: 'With several workers, a CPU-heavy request blocks only the worker that runs it.',
            reproduce: [`${ctx.curl('/heavy?ms=800')} &`, `time ${ctx.curl('/')}`],
          });
        }
        ctx.log(`GET / answered by worker ${answered.pid} in ${answered.ms} ms while /heavy?ms=800 was still running`);
      },
    },
    {
      id: 'default-workers',
      title: 'started without WORKERS, it forks os.availableParallelism() workers',
      timeoutMs: 30000,
      async run(ctx) {
        const expected = availableParallelism();
        ctx.log(`starting again without WORKERS; this machine has availableParallelism() = ${expected}`);
        await ctx.start({ WORKERS: null });
        await countWorkers(ctx, expected, {
          wrongHint: 'when WORKERS is not set, use os.availableParallelism(): Number(process.env.WORKERS) || os.availableParallelism().',
          context: 'without WORKERS',
        });
      },
    },
  ],
};
