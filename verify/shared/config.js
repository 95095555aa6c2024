// "Post a config and see it everywhere": the broadcast lesson's check, shared
// with the capstone (same rule, same tolerance). A config POSTed to one worker
// must be what every worker answers on GET /config within CONVERGE_MS of the
// acknowledged POST, replacements forked later included. Configs are compared
// as values (isDeepStrictEqual): the order of an object's keys is no part of it.
import { isDeepStrictEqual } from 'node:util';
import { failed } from '../../lib/harness/load.js';

export const CONVERGE_MS = 1000;
// However slow the machine, a convergence is judged after this long.
export const HARD_LIMIT_MS = 5000;

/** A config as the learner reads it in a message. */
export const show = (value) => (value === undefined ? '(no config)' : JSON.stringify(value));

/** The curl line that posts `body` as JSON. */
export const postLine = (ctx, body) => `curl -s -X POST -H 'content-type: application/json' -d '${JSON.stringify(body)}' http://127.0.0.1:${ctx.port}/config`;

/** Whether a GET /config answer carries `expected`. */
export const answersConfig = (r, expected) => isDeepStrictEqual(r.json?.config, expected);

/**
 * The answers that prove a worker still had an old config: GET /config
 * answered (200, JSON) to a request sent CONVERGE_MS or more after the update
 * was acknowledged at `updatedAt`, with another config.
 * @returns {{ checked: object[], stale: object[] }} checked: the answers old enough to judge
 */
export function staleAfterUpdate(results, expected, updatedAt, { convergeMs = CONVERGE_MS } = {}) {
  const checked = results.filter((r) => r.url?.endsWith('/config') && !failed(r) && r.start >= updatedAt + convergeMs);
  return { checked, stale: checked.filter((r) => !answersConfig(r, expected)) };
}

/** GET /config over a fresh connection; fails the step unless it answers { pid, config: {...} }. */
export async function getConfig(ctx) {
  const r = await ctx.get('/config', { timeoutMs: 3000 });
  const { config } = r.json;
  if (config === undefined || typeof config !== 'object' || config === null || Array.isArray(config)) {
    ctx.fail('GET /config did not answer { "pid", "config": {...} }.', {
      expected: 'a JSON object with "pid" and "config" (an object; {} before any update)',
      actual: `body ${r.text}`,
      reproduce: ctx.curl('/config'),
      hint: 'answer res.json({ pid: process.pid, config }), where config is the worker\'s current config object.',
    });
  }
  return r;
}

/** POST /config with a JSON object: must answer 200 { pid, ... }. */
export async function postConfig(ctx, body) {
  const r = await ctx.request('/config', { method: 'POST', body, timeoutMs: 3000 });
  ctx.expectJson(r, { status: 200 });
  ctx.log(`POST /config ${JSON.stringify(body)} -> worker ${r.pid}`);
  return r;
}

/** Fails with the primary's last output when it has died (the usual cause: send to a dead worker). */
export function expectPrimaryUp(ctx, when) {
  if (!ctx.program.exited) return;
  const crashedOnSend = ctx.program.tail.some((l) => /ERR_IPC_CHANNEL_CLOSED|Channel closed/.test(l));
  ctx.fail(`The primary crashed ${when}.`, {
    expected: 'the primary keeps running and sends the config to the workers that are alive',
    actual: ctx.program.exit.signal ? `killed by ${ctx.program.exit.signal}` : `exited with code ${ctx.program.exit.code}`,
    explanation: crashedOnSend
      ? 'It sent to a worker whose channel was closed (a worker that had died). worker.send to a dead worker emits an \'error\' event, and an \'error\' nobody listens to crashes the process.'
      : 'An error in the primary ended it, and the workers went with it.',
    hint: 'send only to connected workers: if (worker.isConnected()) worker.send(msg, (err) => { if (err) console.error(err) }). Iterate cluster.workers (dead workers leave it), not a list of your own.',
    outputLines: ctx.program.telltaleLines(),
  });
}

/**
 * Asks GET /config over fresh connections until every current worker's
 * latest answer equals `expected`. It fails only on evidence: a worker that
 * still answered the old config to a request *sent* after the deadline
 * (timeoutMs after the call), so a slow, busy machine that takes long to
 * reach every worker does not fail a correct program. Bounded by HARD_LIMIT_MS.
 * Returns { ok, latest: Map<pid, config>, ms, workers }.
 */
export async function converge(ctx, expected, { timeoutMs = CONVERGE_MS, when = 'while the config spread' } = {}) {
  const latest = new Map(); // pid -> { config, sentAt }
  const started = performance.now();
  const deadline = started + timeoutMs;
  const configs = () => new Map([...latest].map(([pid, a]) => [pid, a.config]));
  const ask = async () => {
    const sentAt = performance.now();
    const r = await ctx.request('/config', { timeoutMs: 3000 });
    if (!r.ok) {
      // No answer: when the primary is dying, say that rather than "no answer".
      await ctx.program.waitForExit(500);
      expectPrimaryUp(ctx, when);
    }
    ctx.expectJson(r);
    const previous = latest.get(r.pid);
    if (!previous || previous.sentAt <= sentAt) latest.set(r.pid, { config: r.json.config, sentAt });
  };
  for (;;) {
    expectPrimaryUp(ctx, when);
    const workers = ctx.workers();
    const ms = Math.round(performance.now() - started);
    const has = (pid) => latest.has(pid) && isDeepStrictEqual(latest.get(pid).config, expected);
    if (workers.length > 0 && workers.every(has)) return { ok: true, latest: configs(), ms, workers };
    const settled = workers.every((pid) => has(pid) || latest.get(pid)?.sentAt >= deadline);
    if ((ms > timeoutMs && settled) || ms > HARD_LIMIT_MS) {
      return { ok: false, latest: new Map([...configs()].filter(([pid]) => workers.includes(pid))), ms, workers };
    }
    // Two at a time: round robin spreads them over the workers.
    await Promise.all([ask(), ask()]);
  }
}

/** "worker 12: {...}" lines for expected/actual. */
export function describeConfigs(latest, workers) {
  return workers.map((pid) => `worker ${pid}: ${latest.has(pid) ? show(latest.get(pid)) : '(never answered)'}`).join('; ');
}

/**
 * Why a worker forked after an update lacks it: the broadcast lesson's
 * explanation, also the capstone's (its replacements and restarts fork many).
 */
export const REPLACEMENT_EXPLANATION =
  'The primary keeps the latest config and gives it to every worker it forks later: replacements of killed workers, the new workers of a rolling restart and of the crash-loop recovery (the broadcast lesson).';
