// Waiting without blocking and without outliving the step: every wait of the
// harness takes the step's AbortSignal and ends at once when it aborts (also
// when it was aborted before the wait began), rejecting with the signal's
// reason, so the runner sees the StepFailure or Interrupted that ended it.
import { setTimeout as delay } from 'node:timers/promises';

/** Resolves after ms; rejects with signal.reason as soon as the signal aborts. */
export async function sleepFor(ms, signal) {
  signal?.throwIfAborted();
  try {
    await delay(ms, undefined, signal ? { signal } : undefined);
  } catch (err) {
    if (signal?.aborted) throw signal.reason;
    throw err;
  }
}

/**
 * Calls fn until it returns a truthy value or timeoutMs passes (a bounded
 * poll, never a fixed sleep as synchronisation). Returns { ok, value, ms }
 * with the last value seen; rejects with signal.reason when the signal aborts.
 */
export async function pollUntil(fn, { timeoutMs, intervalMs = 20, signal } = {}) {
  const started = performance.now();
  const deadline = AbortSignal.timeout(Math.max(0, Math.ceil(timeoutMs)));
  const either = signal ? AbortSignal.any([signal, deadline]) : deadline;
  let value;
  for (;;) {
    signal?.throwIfAborted();
    value = await fn();
    const ms = Math.round(performance.now() - started);
    if (value) return { ok: true, value, ms };
    if (ms >= timeoutMs) return { ok: false, value, ms };
    try {
      await sleepFor(Math.ceil(Math.min(intervalMs, Math.max(1, timeoutMs - ms))), either);
    } catch (err) {
      if (signal?.aborted) throw signal.reason;
      if (!deadline.aborted) throw err;
      // the deadline passed during the pause: one last look below
    }
  }
}
