// "Hang one worker and see it killed": the failure when no worker was
// killed after GET /hang, shared by the health-check lesson and the
// capstone (same check, same message). What the verifier can see tells the
// likely causes apart: the hung worker is the one spinning (for (;;) {}), and
// if it catches SIGTERM while the program's own log names it as one to stop,
// the primary most likely sent it SIGTERM, which a hung loop never handles.
import { readFileSync } from 'node:fs';
import { isAlive, cpuSeconds } from '../../lib/harness/processes.js';

/** Whether the process has a handler installed for signal number `signo` (SigCgt in /proc; false elsewhere). */
export function catchesSignal(pid, signo) {
  try {
    const mask = /SigCgt:\s*([0-9a-f]+)/i.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))?.[1];
    return mask ? Boolean((BigInt(`0x${mask}`) >> BigInt(signo - 1)) & 1n) : false;
  } catch {
    return false;
  }
}

/** The one worker gaining CPU time while the others gain (almost) none, or null. */
export async function spinningWorker(pids) {
  const first = new Map(pids.map((pid) => [pid, cpuSeconds(pid)]));
  await new Promise((r) => setTimeout(r, 300));
  const gains = pids.map((pid) => [pid, (cpuSeconds(pid) ?? 0) - (first.get(pid) ?? 0)]).sort((a, b) => b[1] - a[1]);
  // A spinning loop takes all the CPU it is given; the others, still serving
  // load in the capstone, take a share of theirs: twice the next one, and at
  // least a tenth of the time, tells the hung one.
  if (!gains.length || gains[0][1] < 0.03) return null;
  return gains[0][1] >= 2 * Math.max(0, gains[1]?.[1] ?? 0) ? gains[0][0] : null;
}

/**
 * The failure of "no worker was killed within withinMs of GET /hang".
 * @returns {Promise<{ message, expected, actual, explanation, hint }>}
 */
export async function hungNotKilledFailure(ctx, before, { withinMs, heartbeatTimeout, hangAnswer }) {
  const hung = await spinningWorker(before.filter((pid) => isAlive(pid)));
  const named =
    hung !== null &&
    ctx.program.lastLines(200).some((l) => l.includes(String(hung)) && /kill|sigterm|silent|hung|timeout|heartbeat|unresponsive|stale/i.test(l));
  const sigterm = named && catchesSignal(hung, 15);
  return {
    message: `No worker was killed within ${withinMs / 1000} s of GET /hang.`,
    expected: `the primary notices that one worker stopped sending heartbeats for HEARTBEAT_TIMEOUT=${heartbeatTimeout} ms and kills it (SIGKILL), then forks a replacement`,
    actual: hangAnswer?.ok ? `GET /hang answered (status ${hangAnswer.status}): it must block the event loop forever` : `all of ${before.join(', ')} still alive`,
    explanation: sigterm
      ? `Your program's log names the hung worker ${hung} as one to stop, and that worker has a SIGTERM handler: if the primary sent it SIGTERM (worker.kill() and worker.process.kill() send SIGTERM), the handler can never run in a hung event loop, and the signal changes nothing. Only SIGKILL needs nothing from the process.`
      : "A hung worker never exits, so cluster's 'exit' event never fires for it: only a heartbeat the primary expects, checked on a timer of the primary's own, notices the silence. Possible causes: no heartbeat at all; a check that runs only when a message arrives (never for a worker that sends none); a timeout in the wrong unit (HEARTBEAT_TIMEOUT is in milliseconds); a check that runs once (setTimeout, not setInterval); a check that asks only whether the process is alive (worker.isDead(), process.kill(pid, 0)), which a hung worker is; a SIGTERM that a handler in the worker catches.",
    hint: sigterm
      ? "worker.process.kill('SIGKILL') for a worker silent for longer than HEARTBEAT_TIMEOUT."
      : "workers: setInterval(() => process.send({ type: 'heartbeat' }), HEARTBEAT_TIMEOUT / 4). Primary: remember Date.now() per worker on each heartbeat, and in a setInterval of its own kill (SIGKILL) every worker silent for longer than HEARTBEAT_TIMEOUT milliseconds.",
  };
}

/** Fails when GET /hang answered: the worker must block its event loop forever (health-check, capstone). */
export function expectHangUnanswered(ctx, r) {
  if (!r?.ok) return;
  ctx.fail(`GET /hang answered (status ${r.status}) instead of hanging.`, {
    expected: 'no answer: the worker blocks its event loop forever (for (;;) {})',
    actual: `status ${r.status}`,
    reproduce: ctx.curl('/hang'),
  });
}
