// The verifier's own access to Redis (lesson redis-state): it checks that a
// Redis answers before the learner's program starts, looks at the keys the
// program wrote, and deletes them afterwards. It never waits long and never
// retries forever, unlike a client meant for a server.
import { randomBytes } from 'node:crypto';
import { Redis } from 'ioredis';

export const DEFAULT_REDIS_URL = 'redis://127.0.0.1:6379';

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
