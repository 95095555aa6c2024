// The fork lesson (fork): exactly WORKERS workers, the primary serves nothing, every
// worker takes connections, a busy worker does not block the others, and the
// count follows os.availableParallelism() when WORKERS is unset.
import { availableParallelism } from 'node:os';
import { request } from '../lib/harness/http.js';
import { measureThroughput } from '../lib/harness/throughput.js';
import { speedupSentence } from './shared/speedup.js';
import { basename } from 'node:path';
import { StepFailure } from '../lib/harness/failure.js';
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
          wrongHint:
            'fork Number(process.env.WORKERS) workers, not a fixed number or os.cpus().length; if it does, the missing workers died at start-up (their error, if they printed one, is below).',
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
              explanation:
                'The primary should only fork and watch its workers. A primary that serves requests itself makes the process that manages the cluster as slow as its slowest request. ' +
                "(A primary that calls listen on PORT before forking does not share the port with its workers: in round-robin mode, every worker's listen then fails with EADDRINUSE.)",
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
            explanation:
              'Usually a worker that does not call listen (or listens on another port): it runs, but takes no connections. A worker stuck in a long synchronous task at start-up is silent too.',
            reproduce: `for i in $(seq 10); do ${ctx.curl('/')}; echo; done`,
            hint: 'every worker calls app.listen(process.env.PORT); the primary shares the port between them.',
          });
        }
      },
    },
    {
      id: 'throughput',
      title: 'throughput of /heavy?ms=20 compared with the bottleneck lesson (information)',
      timeoutMs: 15000,
      async run(ctx) {
        const t = await measureThroughput(ctx.port, '/heavy?ms=20', { durationS: 0.5, connections: 2 * WORKERS, signal: ctx.signal });
        const single = ctx.store.get('bottleneck.rps');
        ctx.log(`${t.rps} requests/s with ${WORKERS} workers${speedupSentence(t.rps, single, { workers: WORKERS, cores: availableParallelism() })}`);
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
        try {
          await ctx.start({ WORKERS: null });
        } catch (err) {
          // The readiness failure alone would send the learner to app.listen;
          // what changed since the first start is only WORKERS.
          if (!(err instanceof StepFailure)) throw err;
          const program = ctx.program;
          const workers = program && !program.exited ? ctx.workers() : [];
          if (workers.length > 0) throw err;
          const how = program?.exited
            ? `it ${program.exit.signal ? `was killed by ${program.exit.signal}` : `exited with code ${program.exit.code}`} before it answered`
            : 'it never answered, and has no worker';
          ctx.fail(`Started without WORKERS, ${how}; with WORKERS=${WORKERS} it ran.`, {
            expected: `${expected} workers (os.availableParallelism()) that answer on PORT`,
            actual: `${err.message} No worker process was running.`,
            explanation:
              'The only change from the first start is that WORKERS is not set. The likely cause: the worker count computed from it is NaN or 0 ' +
              '(Number(undefined) is NaN, and for (let i = 0; i < NaN; i++) never runs), so the primary forks no worker and, with nothing to wait for, ends. ' +
              'If workers were forked and died instead, their errors are in the output below.',
            reproduce: `PORT=${program?.port ?? 3000} node ${basename(ctx.file)}   # without WORKERS`,
            hint: 'const workerCount = Number(process.env.WORKERS) || os.availableParallelism();',
            showOutput: true,
          });
        }
        await countWorkers(ctx, expected, {
          wrongHint:
            'when WORKERS is not set, fork os.availableParallelism() workers: Number(process.env.WORKERS) || os.availableParallelism(); if it does, the missing workers died at start-up (their error, if any, is below).',
          context: 'without WORKERS',
        });
      },
    },
  ],
};
