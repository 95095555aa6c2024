// The one bounded poll of the tests: calls fn (sync or async) until it
// returns a truthy value, and resolves with that value; past the deadline it
// fails naming what it waited for. `what` may be a function, called only on
// failure, so the message can show the output seen by then. Never a fixed
// sleep as synchronisation: the interval is how often to look, not how long
// to wait for.
export async function until(fn, what, timeoutMs = 20000, intervalMs = 10) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting until ${typeof what === 'function' ? what() : what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}

/**
 * Waits until read() (the output so far) matches pattern after index `from`,
 * so each wait sees only what came since the last. Resolves with the match,
 * whose `end` is the index just after it in the whole text.
 */
export function untilText(read, pattern, { from = 0, timeoutMs = 20000, intervalMs = 50 } = {}) {
  return until(
    () => {
      const m = pattern.exec(read().slice(from));
      if (m) m.end = from + m.index + m[0].length;
      return m;
    },
    () => `${pattern} in:\n${read()}`,
    timeoutMs,
    intervalMs,
  );
}
