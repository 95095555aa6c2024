// The verifier's own access to Redis (lesson redis-state): it checks that a
// Redis answers before the learner's program starts, looks at the keys the
// program wrote, and deletes them afterwards. It never waits long and never
// retries forever, unlike a client meant for a server.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

/** The name of this process's verifier connections to Redis. */
export function verifierConnectionName(pid = process.pid) {
  return `cluster-workshop-verifier-${pid}`;
}

/** A key prefix no other run uses: every key of this run starts with it. */
export function freshPrefix() {
  return `cluster-workshop:verify:${randomBytes(6).toString('hex')}:`;
}

/**
 * Connects and PINGs within timeoutMs. Resolves { redis } or { error } (the
 * reason in words), never throws.
 */
export async function connectRedis(url, { timeoutMs = 1500 } = {}) {
  let redis;
  try {
    redis = new Redis(url, {
      // Named, so a test can see that no verifier's connection is left open (CLIENT LIST).
      connectionName: verifierConnectionName(),
      lazyConnect: true,
      connectTimeout: timeoutMs,
      maxRetriesPerRequest: 0,
      enableOfflineQueue: false,
      retryStrategy: () => null, // one attempt: the verifier says what is wrong instead of waiting
    });
  } catch (err) {
    return { error: err.message };
  }
  let lastError;
  redis.on('error', (err) => (lastError = err));
  try {
    await withTimeout(redis.connect(), timeoutMs);
    await withTimeout(redis.ping(), timeoutMs);
    return { redis };
  } catch (err) {
    redis.disconnect();
    const cause = lastError ?? err;
    return { error: cause.code === 'ECONNREFUSED' ? 'connection refused' : cause.message };
  }
}

/** Every key that starts with prefix (SCAN, never KEYS: it does not block a shared Redis). */
export async function keysUnder(redis, prefix) {
  const keys = [];
  let cursor = '0';
  do {
    const [next, batch] = await redis.scan(cursor, 'MATCH', `${escapeGlob(prefix)}*`, 'COUNT', 500);
    keys.push(...batch);
    cursor = next;
  } while (cursor !== '0');
  return keys;
}

/** Deletes every key under prefix; resolves the number deleted. */
export async function deleteUnder(redis, prefix) {
  const keys = await keysUnder(redis, prefix);
  if (keys.length) await redis.del(...keys);
  return keys.length;
}

function escapeGlob(text) {
  return text.replace(/[*?[\]\\]/g, '\\$&');
}

function withTimeout(promise, ms) {
  let timer;
  return Promise.race([
    promise,
    new Promise((_, reject) => {
      timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    }),
  ]).finally(() => clearTimeout(timer));
}

/**
 * The before-step of the lessons that keep state in Redis: a Redis answers at
 * REDIS_URL (default 127.0.0.1:6379). It gives the program that REDIS_URL and
 * a fresh REDIS_PREFIX, and leaves the verifier's own client in ctx.data for
 * the steps and for redisTeardown.
 */
export const redisAnswersStep = {
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
    // Kept for redisTeardown even when the run was interrupted meanwhile.
    ctx.data.redis = redis;
    ctx.data.prefix = prefix;
    // The program gets the same Redis and a prefix of its own for this run.
    ctx.lessonEnv = { ...ctx.lessonEnv, REDIS_URL: url, REDIS_PREFIX: prefix };
    ctx.log(`Redis answers at ${url}; this run's keys start with ${prefix} and are deleted afterwards`);
  },
};

/** The teardown of a run that used redisAnswersStep: its keys deleted, its client closed. */
export async function redisTeardown(ctx) {
  const { redis, prefix } = ctx.data;
  if (!redis) return;
  try {
    await deleteUnder(redis, prefix);
  } finally {
    redis.disconnect();
  }
}
