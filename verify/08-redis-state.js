// Lesson 8 (redis-state): the counter and the sessions live in Redis. Checks
// concurrent increments, a session recognised by every worker, a SIGTERM that
// ends the program (workers close their Redis connection), and that the count
// and the session are still there after a new start. Every key must start
// with REDIS_PREFIX; the verifier uses a fresh prefix per run and deletes its
// keys afterwards, so it never touches other data in the same Redis.
import { randomBytes } from 'node:crypto';
import { countWorkers } from './shared/workers.js';
import { expectUniqueIncrements, expectCountEverywhere } from './shared/counter.js';
import { DEFAULT_REDIS_URL, connectRedis, deleteUnder, freshPrefix, keysUnder } from './shared/redis.js';

const WORKERS = 3;
const TOTAL = 300;
const SHUTDOWN_MS = 5000;

const causes = {
  perWorker: {
    explanation: 'A variable in a worker lives in that worker\'s memory only: three workers, three counters. This lesson keeps the count in Redis, which every worker reaches.',
    hint: 'const count = await redis.incr(process.env.REDIS_PREFIX + "count")',
  },
  duplicates: () => ({
    explanation:
      'Two requests read the same value and both wrote it plus one: a GET followed by a SET (or any read-then-write) is two steps, and other workers increment in between. INCR adds one and returns the new value in a single atomic step inside Redis.',
    hint: 'const count = await redis.incr(process.env.REDIS_PREFIX + "count")',
  }),
  noAnswer: {
    explanation: 'The requests waited and never got an answer: is the worker waiting on Redis (a wrong REDIS_URL, a command that never returns)? Its output may say.',
    hint: 'connect with new Redis(process.env.REDIS_URL) and await redis.incr(...) in the route.',
  },
};

const countFromRedis = {
  explanation: 'GET /count must read the count from Redis, where every worker increments it; a worker\'s own variable only knows the increments it served.',
  hint: 'const count = Number(await redis.get(process.env.REDIS_PREFIX + "count")) || 0',
};

export default {
  env: { WORKERS: String(WORKERS) },
  before: [
    {
      id: 'redis-answers',
      title: 'a Redis answers at REDIS_URL',
      async run(ctx) {
        const url = process.env.REDIS_URL || DEFAULT_REDIS_URL;
        const { redis, error } = await connectRedis(url);
        if (!redis) {
          ctx.fail(`No Redis answers at ${url} (${error}).`, {
            explanation:
              `This lesson keeps its state in Redis, so the verifier needs a Redis server to run your program against, and none answered at ${url}. ` +
              'Start one with `redis-server` (Debian/Ubuntu: `sudo apt-get install redis-server`; macOS: `brew install redis`), or with Docker: `docker run -p 6379:6379 redis`; ' +
              'or point the verifier at yours with REDIS_URL=redis://host:port. Then verify again. ' +
              'The lesson is optional: without Redis you can skip it and go on to the next one.',
          });
        }
        const prefix = freshPrefix();
        ctx.data.redis = redis;
        ctx.data.prefix = prefix;
        // The program gets the same Redis and a prefix of its own for this run.
        ctx.lessonEnv = { ...ctx.lessonEnv, REDIS_URL: url, REDIS_PREFIX: prefix };
        ctx.log(`Redis answers at ${url}; this run's keys start with ${prefix} and are deleted afterwards`);
      },
    },
  ],
  async teardown(ctx) {
    const { redis, prefix } = ctx.data;
    if (!redis) return;
    try {
      await deleteUnder(redis, prefix);
    } finally {
      redis.disconnect();
    }
  },
  steps: [
    {
      id: 'worker-count',
      title: `the primary has exactly ${WORKERS} workers`,
      async run(ctx) {
        await countWorkers(ctx, WORKERS, { wrongHint: 'fork Number(process.env.WORKERS) workers (lesson 2).' });
      },
    },
    {
      id: 'unique-increments',
      title: `${TOTAL} concurrent POST /count answer exactly 1 to ${TOTAL}, each once`,
      timeoutMs: 20000,
      async run(ctx) {
        await expectUniqueIncrements(ctx, { total: TOTAL, causes });
      },
    },
    {
      id: 'count-in-redis',
      title: `GET /count answers ${TOTAL} from every worker, and the count is kept under REDIS_PREFIX`,
      async run(ctx) {
        await expectCountEverywhere(ctx, TOTAL, { cause: countFromRedis });
        const { redis, prefix } = ctx.data;
        const keys = await keysUnder(redis, prefix);
        const values = await Promise.all(keys.map((k) => redis.get(k).catch(() => null)));
        const holder = keys.find((k, i) => values[i] === String(TOTAL));
        if (!holder) {
          ctx.fail(`No key that starts with REDIS_PREFIX holds the count ${TOTAL}.`, {
            expected: `a key such as ${prefix}count with the value ${TOTAL}`,
            actual: keys.length ? `keys under the prefix: ${keys.join(', ')}` : `no key starts with ${prefix}`,
            explanation:
              'Every key your program writes must start with process.env.REDIS_PREFIX: it keeps the program\'s keys apart from other data in the same Redis, and the verifier finds (and afterwards deletes) exactly this run\'s keys by it.',
            reproduce: `redis-cli --scan --pattern '${prefix}*'`,
            hint: 'const key = process.env.REDIS_PREFIX + "count"; use that key for INCR and GET.',
          });
        }
        ctx.log(`Redis key ${holder} = ${TOTAL}`);
      },
    },
    {
      id: 'session-everywhere',
      title: 'a session started on one worker is recognised by every worker',
      async run(ctx) {
        const user = `ada-${randomBytes(3).toString('hex')}`;
        const login = await ctx.get('/login', { method: 'POST', body: { user } });
        const cookie = cookieFrom(login);
        if (!cookie) {
          ctx.fail('POST /login answered without setting a cookie.', {
            expected: 'a Set-Cookie header with the session cookie (connect.sid)',
            actual: `headers: ${Object.keys(login.headers).join(', ')}; body ${login.text}`,
            reproduce: ctx.curl('/login', { method: 'POST', body: JSON.stringify({ user }) }),
            hint: 'use express-session and set req.session.user = req.body.user in POST /login (with app.use(express.json()) to read the body).',
          });
        }
        ctx.log(`POST /login {"user":"${user}"} -> ${login.text} (worker ${login.pid}); cookie ${cookie.split('=')[0]}`);
        ctx.data.session = { user, cookie, createdBy: login.pid };

        const anonymous = await ctx.request('/me');
        ctx.expectJson(anonymous, { status: 401 });

        await expectSessionEverywhere(ctx, { when: '' });

        const { redis, prefix } = ctx.data;
        const keys = await keysUnder(redis, prefix);
        const values = await Promise.all(keys.map((k) => redis.get(k).catch(() => null)));
        if (!values.some((v) => typeof v === 'string' && v.includes(user))) {
          ctx.fail('Every worker knows the session, but no key that starts with REDIS_PREFIX holds it.', {
            expected: `a session key such as ${prefix}sess:<id> holding "${user}"`,
            actual: keys.length ? `keys under the prefix: ${keys.join(', ')}` : `no key starts with ${prefix}`,
            explanation: 'connect-redis writes sessions under its own prefix, "sess:" unless told otherwise: give it the run\'s prefix.',
            reproduce: `redis-cli --scan --pattern '${prefix}*'`,
            hint: 'new RedisStore({ client: redis, prefix: process.env.REDIS_PREFIX + "sess:" })',
          });
        }
      },
    },
    {
      id: 'sigterm-exits',
      title: `SIGTERM to the primary ends the program with code 0 within ${SHUTDOWN_MS / 1000} s, leaving no worker`,
      timeoutMs: SHUTDOWN_MS + 5000,
      async run(ctx) {
        const program = ctx.program;
        const workers = ctx.workers();
        ctx.signalPrimary('SIGTERM');
        const exit = await program.waitForExit(SHUTDOWN_MS);
        if (!exit) {
          const alive = workers.filter((pid) => ctx.workers().includes(pid));
          ctx.fail(`The program was still running ${SHUTDOWN_MS / 1000} s after SIGTERM.`, {
            expected: `the primary exits with code 0 within ${SHUTDOWN_MS / 1000} s`,
            actual: alive.length
              ? `the primary waits for workers ${alive.join(', ')}, which are still alive`
              : `the primary is still running (pid ${program.pid}), with ${ctx.workers().length} worker(s)`,
            explanation: alive.length
              ? 'A worker ends by itself once nothing keeps its event loop busy. After worker.disconnect() its server is closed, but an open Redis connection keeps the loop busy, so the drained worker lives on forever. Close the connection when the worker disconnects.'
              : 'The primary has no worker left but does not end: something keeps it running (a timer, a server, a fork after the deaths).',
            reproduce: [`kill -TERM ${program.pid}`, `pgrep -P ${program.pid}   # the workers that do not end`],
            hint: alive.length
              ? "in the worker: cluster.worker.on('disconnect', () => redis.quit())"
              : "in the primary's SIGTERM handler, set a flag so the 'exit' handler does not fork replacements, and disconnect the workers.",
            showOutput: true,
          });
        }
        if (exit.code !== 0) {
          ctx.fail(`The program ended with ${exit.signal ? `signal ${exit.signal}` : `exit code ${exit.code}`} after SIGTERM.`, {
            expected: 'exit code 0: a stop that was asked for is not a failure',
            actual: exit.signal ? `killed by ${exit.signal} (no SIGTERM handler in the primary)` : `exit code ${exit.code}`,
            explanation: 'Without a SIGTERM handler, the signal kills the primary at once: its workers are cut off mid-request and nothing closes their connections.',
            hint: "process.on('SIGTERM', () => { stopping = true; for (const w of Object.values(cluster.workers)) w.disconnect(); }) in the primary; it ends with code 0 once the last worker has exited.",
            showOutput: true,
          });
        }
        // The primary is gone; its workers must be gone too (bounded wait for the last to end).
        const left = await ctx.poll(() => program.processes().length === 0, { timeoutMs: 500 });
        if (!left.ok) {
          const pids = program.processes().map((p) => p.pid);
          ctx.fail(`The primary exited, but left ${pids.length} process(es) running: ${pids.join(', ')}.`, {
            expected: 'no worker left once the primary has exited',
            actual: `still running: ${pids.join(', ')}`,
            explanation:
              'The primary ended before its workers did (for example process.exit() on a timer after disconnecting them). A disconnected worker whose Redis connection is still open never ends by itself: it stays behind, orphaned, holding its connection.',
            reproduce: [`kill -TERM ${program.pid}`, `ps -o pid,ppid,cmd -p ${pids.join(',')}`],
            hint: "in the worker: cluster.worker.on('disconnect', () => redis.quit()); let the primary end by itself after the last worker's 'exit' (a timer that forces the exit must kill the workers first: worker.process.kill()).",
            showOutput: true,
          });
        }
        ctx.log(`exit code 0 after ${Math.round(performance.now() - program.startedAt)} ms of life; no worker left`);
      },
    },
    {
      id: 'survives-restart',
      title: `started again, the count is still ${TOTAL} and the session still known`,
      timeoutMs: 30000,
      async run(ctx) {
        await ctx.start();
        await expectCountEverywhere(ctx, TOTAL, { when: ' after a new start', cause: countFromRedis });
        await expectSessionEverywhere(ctx, { when: ' after a new start' });
        const r = await ctx.get('/count', { method: 'POST' });
        if (r.json.count !== TOTAL + 1) {
          ctx.fail(`The next POST /count answered ${JSON.stringify(r.json.count)} after a new start.`, {
            expected: `"count": ${TOTAL + 1}`,
            actual: r.text,
            reproduce: ctx.curl('/count', { method: 'POST' }),
            hint: 'INCR the same key in Redis; nothing is reset at start-up.',
          });
        }
        ctx.log(`POST /count -> ${r.text}`);
      },
    },
  ],
};

/** The session cookie(s) of a response, as a Cookie header: "name=value; ...". */
function cookieFrom(r) {
  const set = [r.headers?.['set-cookie'] ?? []].flat();
  return set.map((c) => c.split(';')[0].trim()).filter(Boolean).join('; ');
}

/** GET /me with the session cookie answers the user from every current worker. */
async function expectSessionEverywhere(ctx, { when }) {
  const { user, cookie, createdBy } = ctx.data.session;
  const workers = ctx.workers();
  const seen = new Set();
  const meCurl = `curl -s -b '${cookie}' http://127.0.0.1:${ctx.port}/me`;
  for (let i = 0; i < 60 && !workers.every((pid) => seen.has(pid)); i++) {
    const r = await ctx.request('/me', { headers: { cookie }, timeoutMs: 3000 });
    if (r.ok && r.status === 401) {
      const { redis, prefix } = ctx.data;
      const keys = await keysUnder(redis, prefix);
      const values = await Promise.all(keys.map((k) => redis.get(k).catch(() => null)));
      const inRedis = values.some((v) => typeof v === 'string' && v.includes(user));
      ctx.fail(`Worker ${r.pid} did not recognise the session created on worker ${createdBy}${when}.`, {
        expected: `{ "pid": <pid>, "user": "${user}" } from every worker`,
        actual: `status 401 from worker ${r.pid}: ${r.text}`,
        explanation: inRedis
          ? 'The session is in Redis, but this worker rejected the cookie: express-session signs the cookie with its secret, and a worker (or a new start) with another secret cannot read it. Every worker must use the same secret.'
          : `The session is not in Redis under ${ctx.data.prefix}: it lives in the memory of the worker that created it (express-session's default MemoryStore), so the other workers${when ? ', and a new start,' : ''} do not know it.`,
        reproduce: [
          `curl -s -c cookies.txt -H 'content-type: application/json' -d '{"user":"${user}"}' http://127.0.0.1:${ctx.port}/login`,
          `for i in $(seq 6); do curl -s -b cookies.txt http://127.0.0.1:${ctx.port}/me; echo; done`,
        ],
        hint: inRedis
          ? "use one fixed secret: session({ secret: process.env.SESSION_SECRET || 'a constant', ... }), never a random one per process."
          : 'session({ store: new RedisStore({ client: redis, prefix: process.env.REDIS_PREFIX + "sess:" }), ... })',
      });
    }
    ctx.expectJson(r);
    if (r.json.user !== user) {
      ctx.fail(`GET /me answered another user from worker ${r.pid}${when}.`, {
        expected: `"user": "${user}"`,
        actual: r.text,
        reproduce: meCurl,
        hint: 'POST /login stores req.session.user = req.body.user; GET /me answers it.',
      });
    }
    seen.add(r.pid);
  }
  const silent = workers.filter((pid) => !seen.has(pid));
  if (silent.length) {
    ctx.fail(`Worker ${silent.join(', ')} never answered GET /me in 60 requests.`, {
      expected: `answers from every worker (${workers.join(', ')})`,
      actual: `answers from ${[...seen].join(', ')}`,
      showOutput: true,
    });
  }
  ctx.log(`GET /me with the session cookie answered "${user}" from every worker (${[...seen].join(', ')})${when}`);
}
