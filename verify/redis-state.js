// The redis-state lesson (redis-state): the counter and the sessions live in Redis. Checks
// concurrent increments, a session recognised by every worker, a SIGTERM that
// ends the program (workers close their Redis connection), and that the count
// and the session are still there after a new start. Every key must start
// with REDIS_PREFIX; the verifier uses a fresh prefix per run and deletes its
// keys afterwards, so it never touches other data in the same Redis.
import { randomBytes } from 'node:crypto';
import { countWorkers } from './shared/workers.js';
import { expectUniqueIncrements, expectCountEverywhere } from './shared/counter.js';
import { keysUnder, redisAnswersStep, redisTeardown } from './shared/redis.js';

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
      'Two requests answered the same value. The usual causes: a read-then-write (GET, add one, SET) is two steps, and other workers increment in between; or each worker counts in its own memory and writes its count to Redis. INCR adds one and returns the new value in a single atomic step inside Redis.',
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
  before: [redisAnswersStep],
  teardown: redisTeardown,
  steps: [
    {
      id: 'worker-count',
      title: `the primary has exactly ${WORKERS} workers`,
      async run(ctx) {
        await countWorkers(ctx, WORKERS, { wrongHint: 'fork Number(process.env.WORKERS) workers (the fork lesson), and keep them alive: if it does, the missing workers died at start-up (their error, if they printed one, is below).' });
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
        const stored = await valuesUnder(redis, prefix);
        const holder = stored.find((v) => v.scalars.includes(String(TOTAL)))?.key;
        if (!holder) {
          ctx.fail(`No key that starts with REDIS_PREFIX holds the count ${TOTAL}.`, {
            expected: `a key such as ${prefix}count with the value ${TOTAL}`,
            actual: stored.length ? `keys under the prefix: ${describeKeys(stored)}` : `no key starts with ${prefix}`,
            explanation:
              'Every key your program writes must start with process.env.REDIS_PREFIX: it keeps the program\'s keys apart from other data in the same Redis, and the verifier finds (and afterwards deletes) exactly this run\'s keys by it. ' +
              'The count may be a string key or a field of a hash under the prefix.',
            reproduce: `redis-cli --scan --pattern '${prefix}*'`,
            hint: 'const key = process.env.REDIS_PREFIX + "count"; use that key for INCR and GET.',
          });
        }
        ctx.data.countKey = holder;
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
        const stored = await valuesUnder(redis, prefix);
        if (!stored.some((v) => v.text.includes(user))) {
          ctx.fail('Every worker knows the session, but no key that starts with REDIS_PREFIX holds it.', {
            expected: `a session key such as ${prefix}sess:<id> (a string, a hash, any type) holding "${user}"`,
            actual: stored.length ? `keys under the prefix: ${describeKeys(stored)}` : `no key starts with ${prefix}`,
            explanation:
              'The session is shared by the workers, so it is kept somewhere they all reach, but not under REDIS_PREFIX. connect-redis, for one, writes sessions under its own prefix, "sess:", unless told otherwise: give it the run\'s prefix.',
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
          const now = ctx.workers();
          const alive = workers.filter((pid) => now.includes(pid));
          const forkedAfter = now.filter((pid) => !workers.includes(pid));
          if (!alive.length && forkedAfter.length) {
            ctx.fail(`The program was still running ${SHUTDOWN_MS / 1000} s after SIGTERM, with ${forkedAfter.length} worker(s) forked after it.`, {
              expected: `the primary exits with code 0 within ${SHUTDOWN_MS / 1000} s`,
              actual: `the workers it had (${workers.join(', ')}) are gone; new ones run: ${forkedAfter.join(', ')}`,
              explanation:
                "The workers the primary stopped were replaced: its 'exit' handler forks a replacement for every worker that exits, the ones it is stopping included, so the program never runs out of workers.",
              reproduce: [`kill -TERM ${program.pid}`, `pgrep -P ${program.pid}   # new pids`],
              hint: "in the primary's SIGTERM handler, set a flag (stopping = true) and fork nothing in 'exit' once it is set.",
              showOutput: true,
            });
          }
          ctx.fail(`The program was still running ${SHUTDOWN_MS / 1000} s after SIGTERM.`, {
            expected: `the primary exits with code 0 within ${SHUTDOWN_MS / 1000} s`,
            actual: alive.length
              ? `the primary waits for workers ${alive.join(', ')}, which are still alive`
              : `the primary is still running (pid ${program.pid}), with ${ctx.workers().length} worker(s)`,
            explanation: alive.length
              ? 'A worker ends by itself once nothing keeps its event loop busy. The usual causes: the primary disconnected its workers, but each still has an open Redis connection (or another handle: a timer, a server), which keeps the drained worker alive forever; close the connection when the worker disconnects. ' +
                'Or the primary never asked them to stop: its SIGTERM handler neither disconnects nor kills them.'
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
            actual: exit.signal ? `killed by ${exit.signal}: the signal's default action ran` : `exit code ${exit.code}`,
            explanation: exit.signal
              ? 'The primary died of the signal itself: it has no SIGTERM handler, or its handler removed itself and raised the signal again. Killed that way, the primary cuts its workers off mid-request and nothing closes their connections.'
              : 'A stop that was asked for is not a failure: once every worker has exited, the primary should end with code 0 (process.exitCode, or no process.exit at all).',
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
        await expectCountEverywhere(ctx, TOTAL, { when: ' after a new start', cause: await countAfterRestart(ctx) });
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

/**
 * Every key under prefix with its type and what it holds, whatever the type:
 * { key, type, text (everything it holds, for a search), scalars (the single
 * values: a string's value, a hash's field values, a list's or set's members) }.
 */
async function valuesUnder(redis, prefix) {
  const keys = await keysUnder(redis, prefix);
  return Promise.all(
    keys.map(async (key) => {
      const type = await redis.type(key).catch(() => 'unknown');
      let scalars = [];
      try {
        if (type === 'string') scalars = [await redis.get(key)];
        else if (type === 'hash') scalars = Object.values(await redis.hgetall(key));
        else if (type === 'list') scalars = await redis.lrange(key, 0, -1);
        else if (type === 'set') scalars = await redis.smembers(key);
        else if (type === 'zset') scalars = await redis.zrange(key, 0, -1);
        else if (type === 'ReJSON-RL') scalars = [await redis.call('JSON.GET', key)];
      } catch {
        // the key expired or changed type meanwhile: it holds nothing we can read
      }
      scalars = scalars.filter((v) => typeof v === 'string');
      const fields = type === 'hash' ? await redis.hkeys(key).catch(() => []) : [];
      return { key, type, scalars, text: [...fields, ...scalars].join('\n') };
    }),
  );
}

/** "p:count (string), p:sess:1 (hash)" */
function describeKeys(stored) {
  const shown = stored.slice(0, 8).map((v) => `${v.key} (${v.type})`);
  return `${shown.join(', ')}${stored.length > 8 ? `, and ${stored.length - 8} more` : ''}`;
}

/** The session cookie(s) of a response, as a Cookie header: "name=value; ...". */
function cookieFrom(r) {
  const set = [r.headers?.['set-cookie'] ?? []].flat();
  return set.map((c) => c.split(';')[0].trim()).filter(Boolean).join('; ');
}

/**
 * The explanation for a count that is wrong after a new start, from what
 * Redis holds now: the key that held the count before the stop was reset
 * (something at start-up writes it), or it still holds the count and the
 * workers do not read it.
 */
async function countAfterRestart(ctx) {
  const { redis, countKey } = ctx.data;
  const now = countKey ? (await valuesUnder(redis, countKey)).find((v) => v.key === countKey) : undefined;
  if (!countKey || now?.scalars.includes(String(TOTAL))) return countFromRedis;
  return {
    explanation:
      `Before the stop, ${countKey} held ${TOTAL}; after the new start it holds ${now ? now.scalars.join(', ') || '(nothing)' : '(the key is gone)'}. ` +
      'Something at start-up reset it: a SET of the count to 0 (or a DEL, a FLUSHDB) when the program starts. The count must outlive a restart: never initialise it, INCR creates it at 0 the first time.',
    hint: 'remove the start-up write; GET /count answers Number(await redis.get(key)) || 0 when the key does not exist yet.',
  };
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
      const inRedis = (await valuesUnder(redis, prefix)).some((v) => v.text.includes(user));
      ctx.fail(`Worker ${r.pid} did not recognise the session created on worker ${createdBy}${when}.`, {
        expected: `{ "pid": <pid>, "user": "${user}" } from every worker`,
        actual: `status 401 from worker ${r.pid}: ${r.text}`,
        explanation: inRedis
          ? 'The session is in Redis, but this worker rejected the cookie: express-session signs the cookie with its secret, and a worker (or a new start) with another secret cannot read it. Every worker must use the same secret.'
          : `No key under ${ctx.data.prefix} holds the session, so the other workers${when ? ', and a new start,' : ''} cannot know it. The usual causes: ` +
            "no store is given to express-session, so it keeps sessions in the memory of the worker that created them (its default MemoryStore); " +
            'or the store fails to save them (its errors, if it logs any, are below: for example connect-redis 9 works only with the redis package, not with ioredis); ' +
            'or it saves them under a key that does not start with REDIS_PREFIX.',
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
