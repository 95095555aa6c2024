// A bounded poll for tests: resolves with fn's value once truthy, or fails
// naming what it waited for. Never a fixed sleep.
export async function until(fn, what, timeoutMs = 20000, intervalMs = 10) {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = fn();
    if (value) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting until ${what}`);
    await new Promise((r) => setTimeout(r, intervalMs));
  }
}
