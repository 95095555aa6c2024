// Token buckets per key (a learner, a client address): `burst` at once, then
// one more every `refillMs`. The map is bounded: the oldest key goes first.

export class RateLimiter {
  constructor({ burst, refillMs, maxKeys = 10000, now = Date.now }) {
    this.burst = burst;
    this.refillMs = refillMs;
    this.maxKeys = maxKeys;
    this.now = now;
    this.buckets = new Map();
  }

  level(key) {
    const t = this.now();
    const b = this.buckets.get(key);
    if (!b) return { tokens: this.burst, t };
    return { tokens: Math.min(this.burst, b.tokens + (t - b.t) / this.refillMs), t };
  }

  /** Whether `cost` tokens are left now (nothing is taken). */
  allows(key, cost = 1) {
    return this.level(key).tokens >= cost;
  }

  /** Takes `cost` tokens; false (and nothing taken) when there are not enough. */
  take(key, cost = 1) {
    const { tokens, t } = this.level(key);
    if (tokens < cost) return false;
    this.buckets.delete(key); // re-insert: the map's order is the eviction order
    this.buckets.set(key, { tokens: tokens - cost, t });
    if (this.buckets.size > this.maxKeys) this.buckets.delete(this.buckets.keys().next().value);
    return true;
  }

  /** Seconds until `cost` tokens are there, for Retry-After. */
  retryAfter(key, cost = 1) {
    const { tokens } = this.level(key);
    return Math.max(1, Math.ceil(((cost - tokens) * this.refillMs) / 1000));
  }
}
