// The learner's side of a classroom: joining, reporting each verify outcome,
// and leaving. The join (address, code, name, learner key) and the queue of
// results not yet sent live in one small file: classroom.json in the
// workspace folder when there is one, else in the user's config folder.
// Reporting never throws and never takes longer than a short budget: what
// cannot be sent now is queued and goes with a later verify. It talks to the
// classroom with fetch (the harness's client is for probing learner programs).
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { writeFileAtomicSync } from '../fs/atomic-write.js';
import { workspaceDir } from '../progress.js';
import { LIMITS } from './limits.js';

export const JOIN_FILE = 'classroom.json';
const JOIN_VERSION = 1;
// Results kept while the classroom is unreachable; the oldest go first.
export const MAX_QUEUE = 50;
// The whole of reporting after a verify, all requests included.
export const REPORT_BUDGET_MS = 1000;
const JOIN_TIMEOUT_MS = 5000;

export class ClassroomError extends Error {}

export function configDir(env = process.env) {
  const base = env.XDG_CONFIG_HOME && env.XDG_CONFIG_HOME.startsWith('/') ? env.XDG_CONFIG_HOME : join(env.HOME || homedir(), '.config');
  return join(base, 'cluster-workshop');
}

function isDir(path) {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}

/** Where join info is looked for, in order: the workspace (if it exists), then the config folder. */
export function joinFileCandidates({ dir, env = process.env, cwd = process.cwd() } = {}) {
  const workspace = workspaceDir(dir, env, cwd);
  return [...(isDir(workspace) ? [join(workspace, JOIN_FILE)] : []), join(configDir(env), JOIN_FILE)];
}

/** The join file in use: { file, info } or null when not joined. Throws ClassroomError when unreadable. */
export function loadJoin(where = {}) {
  for (const file of joinFileCandidates(where)) {
    if (!existsSync(file)) continue;
    let info;
    try {
      info = JSON.parse(readFileSync(file, 'utf8'));
    } catch (err) {
      throw new ClassroomError(`Your classroom file ${file} could not be read (${err.code ?? err.message}). Run cluster-workshop join again, or cluster-workshop leave.`);
    }
    if (info?.version !== JOIN_VERSION || typeof info.url !== 'string' || typeof info.key !== 'string') {
      throw new ClassroomError(`Your classroom file ${file} is not one this version understands. Run cluster-workshop join again, or cluster-workshop leave.`);
    }
    info.queue = Array.isArray(info.queue) ? info.queue : [];
    info.attempts = info.attempts && typeof info.attempts === 'object' ? info.attempts : {};
    return { file, info };
  }
  return null;
}

/** Writes the join file atomically, readable by its owner only (it holds the learner key). */
export function saveJoin(file, info) {
  try {
    mkdirSync(dirname(file), { recursive: true });
    writeFileAtomicSync(file, `${JSON.stringify(info, null, 2)}\n`, { mode: 0o600 });
  } catch (err) {
    throw new ClassroomError(
      `Could not save your classroom file in ${dirname(file)} (${err.code ?? err.message}). Make that folder writable, or set XDG_CONFIG_HOME to a folder you can write to, or create your workspace first (cluster-workshop start) so the file goes there.`,
    );
  }
}

/** Parses a classroom address: { base, host, port, prefix } or throws ClassroomError. */
export function parseClassroomUrl(text) {
  let url;
  try {
    url = new URL(/^[a-z]+:\/\//i.test(text) ? text : `http://${text}`);
  } catch {
    throw new ClassroomError(`"${text}" is not an address. Use the one your instructor shows, for example http://192.168.1.20:4100`);
  }
  if (url.protocol !== 'http:') throw new ClassroomError(`The classroom address must start with http:// (got ${url.protocol}//). Use the one your instructor shows.`);
  const prefix = url.pathname.replace(/\/+$/, '');
  return { base: `http://${url.host}${prefix}`, host: url.hostname.replace(/^\[|\]$/g, ''), port: Number(url.port || 80), prefix };
}

const NETWORK_ERRORS = {
  ECONNREFUSED: 'connection refused',
  ECONNRESET: 'connection reset',
  ENOTFOUND: 'no such host',
  EAI_AGAIN: 'no such host (name lookup failed)',
  EHOSTUNREACH: 'host unreachable',
  ENETUNREACH: 'network unreachable',
  ETIMEDOUT: 'connection timed out',
};

/**
 * One POST to the classroom, bounded by timeoutMs; never throws.
 * { ok: true, status, text, json } when an answer came, else { ok: false, code: 'TIMEOUT', ms } or { ok: false, error }.
 */
async function post(target, path, body, { code, timeoutMs }) {
  try {
    const res = await fetch(`${target.base}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-join-code': code },
      body: JSON.stringify(body),
      redirect: 'manual',
      signal: AbortSignal.timeout(Math.max(1, Math.round(timeoutMs))),
    });
    const text = await res.text();
    let json;
    try {
      json = JSON.parse(text);
    } catch {
      json = undefined;
    }
    return { ok: true, status: res.status, text, json };
  } catch (err) {
    if (err?.name === 'TimeoutError' || err?.name === 'AbortError') return { ok: false, code: 'TIMEOUT', ms: Math.round(timeoutMs) };
    const cause = err?.cause;
    if (cause?.message === 'bad port') return { ok: false, error: `port ${target.port} is one that browsers and fetch refuse to use; ask your instructor to run the classroom on another port` };
    return { ok: false, error: NETWORK_ERRORS[cause?.code] ?? cause?.code ?? cause?.message ?? err?.message ?? String(err) };
  }
}

function unreachable(result, base) {
  return result.code === 'TIMEOUT' ? `no answer from ${base} within ${result.ms} ms` : `could not reach ${base} (${result.error})`;
}

/**
 * Joins a class and saves the join file. Returns { file, info, previous } (previous: the join it replaced, if any).
 * Throws ClassroomError with the fix when it cannot.
 */
export async function joinClass({ url, code, name, dir, env = process.env, cwd = process.cwd(), timeoutMs = JOIN_TIMEOUT_MS }) {
  const target = parseClassroomUrl(url);
  const cleanCode = String(code).trim().toUpperCase();
  const previous = (() => {
    try {
      return loadJoin({ dir, env, cwd });
    } catch {
      return null;
    }
  })();
  // Where the file goes is checked before joining, so an unwritable folder
  // does not leave a learner registered under a name they cannot use.
  const file = joinFileCandidates({ dir, env, cwd })[0];
  probeWritable(file);
  // Joining again the class one is in, under the same name (for example once
  // the workspace exists): keep the same learner, queue and counts.
  const same = previous?.info;
  if (same && same.url === target.base && same.code === cleanCode && same.name.toLowerCase() === String(name).toLowerCase()) {
    saveJoin(file, same);
    if (previous.file !== file) rmSync(previous.file, { force: true });
    return { file, info: same, previous: null, already: true };
  }
  const r = await post(target, '/api/join', { name }, { code: cleanCode, timeoutMs });
  if (!r.ok) throw new ClassroomError(`Could not join: ${unreachable(r, target.base)}. Check the address your instructor shows, that the classroom is running, and that you are on the same network.`);
  if (r.status === 401 || r.status === 403) throw new ClassroomError(`The classroom at ${target.base} refused the join code "${cleanCode}". Check the code your instructor shows.`);
  if (r.status === 429) throw new ClassroomError(`The classroom at ${target.base} refused too many attempts from this machine; wait a minute and try again.`);
  if (r.status === 400 || r.status === 409) throw new ClassroomError(`The classroom refused to join you: ${r.json?.error ?? r.text}`);
  if (r.status !== 201 || typeof r.json?.key !== 'string') throw new ClassroomError(`Unexpected answer from ${target.base} (status ${r.status}). Is that the classroom's address?`);
  const info = { version: JOIN_VERSION, url: target.base, code: cleanCode, name: printable(r.json.name), learner: String(r.json.learner), key: r.json.key, title: printable(r.json.title), joinedAt: new Date().toISOString(), attempts: {}, queue: [] };
  saveJoin(file, info);
  // rejoined: the instructor let this learner back in under their name (their results are kept).
  return { file, info, previous, rejoined: r.json.rejoined === true };
}

// What the classroom sends back is shown in the learner's terminal: no control characters.
const printable = (s) => String(s ?? '').replace(/[\p{Cc}\p{Cf}]/gu, '').slice(0, 200);

function probeWritable(file) {
  const probe = `${file}.${process.pid}.probe`;
  try {
    mkdirSync(dirname(file), { recursive: true });
    writeFileSync(probe, '');
    rmSync(probe, { force: true });
  } catch (err) {
    throw new ClassroomError(
      `Cannot save your classroom file in ${dirname(file)} (${err.code ?? err.message}). Make that folder writable, or set XDG_CONFIG_HOME to a folder you can write to, or create your workspace first so the file goes there.`,
    );
  }
}

/** Removes every join file (workspace and config folder). Returns { removed: [files], unsent }. */
export function leaveClass({ dir, env = process.env, cwd = process.cwd() } = {}) {
  const removed = [];
  let unsent = 0;
  let info = null;
  for (const file of joinFileCandidates({ dir, env, cwd })) {
    if (!existsSync(file)) continue;
    try {
      const parsed = JSON.parse(readFileSync(file, 'utf8'));
      info ??= parsed;
      unsent += Array.isArray(parsed.queue) ? parsed.queue.length : 0;
    } catch {
      // An unreadable file is removed all the same.
    }
    try {
      rmSync(file, { force: true });
    } catch (err) {
      throw new ClassroomError(`Could not remove ${file} (${err.code ?? err.message}); delete it by hand to stop reporting.`);
    }
    removed.push(file);
  }
  return { removed, unsent, info };
}

/**
 * Sends the queue (oldest first) in batches until it is empty or the budget
 * is spent. Returns { sent, accepted, dropped, droppedIds, dropReason, outcome, detail }
 * where outcome is 'sent' | 'unreachable' | 'refused' | 'busy'; sent counts
 * the results that left the queue with a 200, accepted those the classroom
 * counted (not the ones it already had: a retry whose first try arrived).
 */
export async function flushQueue(info, { deadline, timeoutMs = REPORT_BUDGET_MS }) {
  const target = parseClassroomUrl(info.url);
  const done = { sent: 0, accepted: 0, dropped: 0, droppedIds: [], dropReason: null };
  const stop = (outcome, detail) => ({ ...done, outcome, detail });
  const send = (reports) =>
    post(target, '/api/reports', { learner: info.learner, key: info.key, reports }, { code: info.code, timeoutMs: Math.min(Math.max(deadline - Date.now(), 50), timeoutMs) });
  const took = (r, n) => {
    done.sent += n;
    done.accepted += Number.isInteger(r.json?.accepted) ? r.json.accepted : n;
  };
  const drop = (r) => {
    const [gone] = info.queue.splice(0, 1);
    done.dropped += 1;
    done.droppedIds.push(gone.id);
    done.dropReason = printable(r.json?.error ?? `status ${r.status}`).replace(/^report \d+: /, '');
  };
  while (info.queue.length) {
    const left = deadline - Date.now();
    if (left < 50) return stop('unreachable', `no answer from ${target.base} in time`);
    const batch = info.queue.slice(0, LIMITS.maxReportsPerRequest);
    const r = await send(batch);
    if (!r.ok) return stop('unreachable', unreachable(r, target.base));
    if (r.status === 200) {
      info.queue.splice(0, batch.length);
      took(r, batch.length);
    } else if (r.status === 400) {
      // A result this classroom will never take (a lesson or step it does not
      // know): find it by sending one at a time, drop it, keep the others.
      if (batch.length === 1) drop(r);
      else {
        const single = await send([batch[0]]);
        if (!single.ok) return stop('unreachable', unreachable(single, target.base));
        if (single.status === 200) {
          info.queue.shift();
          took(single, 1);
        } else if (single.status === 400) drop(single);
        else return stop('busy', `${target.base} answered ${single.status}`);
      }
    } else if (r.status === 401 || r.status === 403) {
      return stop('refused', `${target.base} no longer accepts your join`);
    } else {
      return stop('busy', `${target.base} answered ${r.status}`);
    }
  }
  return stop('sent');
}

/**
 * Called by verify after each run. Never throws; resolves within the budget.
 * @param {object} o
 * @param {string} o.lesson lesson id
 * @param {{ passed: boolean, durationMs: number, steps: { id: string, passed: boolean }[] }} o.report
 * @param {number} o.attempts verify runs of this lesson so far, this one included
 * @param {string} [o.dir] --dir of the workspace
 * @param {{ env?: object, cwd?: string, err?: (s: string) => void }} [o.io]
 * @returns {Promise<null | { outcome: string, queued: number, sent: number, message: string }>} null when not in a class
 */
export async function reportVerify({ lesson, report, attempts, dir, io = {}, budgetMs = REPORT_BUDGET_MS }) {
  const say = (message) => {
    try {
      io.err?.(`classroom: ${message}\n`);
    } catch {
      // reporting must not break verify, not even its output
    }
  };
  try {
    const deadline = Date.now() + budgetMs;
    const joined = loadJoin({ dir, env: io.env ?? process.env, cwd: io.cwd ?? process.cwd() });
    if (!joined) return null;
    const { file, info } = joined;
    const attempt = Math.max(Number.isInteger(attempts) && attempts > 0 ? attempts : 1, (info.attempts[lesson] ?? 0) + 1);
    info.attempts[lesson] = attempt;
    const failed = report.steps?.find((s) => !s.passed);
    const id = randomBytes(12).toString('base64url');
    info.queue.push({
      id,
      lesson,
      passed: Boolean(report.passed),
      failedStep: report.passed ? null : (failed?.id ?? 'starts'),
      durationMs: Math.max(0, Math.round(report.durationMs ?? 0)),
      attempt,
      at: new Date().toISOString(),
    });
    // The queue is bounded: the oldest results go, and the learner is told.
    const overflow = Math.max(info.queue.length - MAX_QUEUE, 0);
    if (overflow > 0) info.queue.splice(0, overflow);

    const result = await flushQueue(info, { deadline });
    let saveProblem = null;
    try {
      saveJoin(file, info);
    } catch (err) {
      saveProblem = err.message;
    }
    const queued = info.queue.length;
    const thisDropped = result.droppedIds.includes(id);
    const earlier = result.accepted - (result.outcome === 'sent' && !thisDropped ? 1 : 0);
    const where = info.title ? `"${info.title}"` : info.url;
    let message;
    if (thisDropped) message = `${where} did not take this result (${result.dropReason}); it was dropped.`;
    else if (result.outcome === 'sent') message = `result sent to ${where}${earlier > 0 ? ` (with ${earlier} queued before)` : ''}.`;
    else if (result.outcome === 'refused') message = `${result.detail} (the instructor may have started a new class). Run cluster-workshop join again, or cluster-workshop leave. ${queued} result(s) kept.`;
    else message = `${result.detail}; ${queued} result(s) queued, sent with your next verify.`;
    const otherDropped = result.dropped - (thisDropped ? 1 : 0);
    if (otherDropped > 0) message += ` ${otherDropped} earlier result(s) the classroom does not take were dropped.`;
    if (overflow > 0) message += ` The queue keeps ${MAX_QUEUE} results: the ${overflow} oldest were dropped.`;
    if (saveProblem) message += ` ${saveProblem}`;
    say(message);
    return { outcome: result.outcome, queued, sent: result.sent, accepted: result.accepted, dropped: result.dropped + overflow, message };
  } catch (err) {
    say(err instanceof ClassroomError ? err.message : `reporting failed (${err?.message ?? err}); your verify result is unchanged.`);
    return { outcome: 'error', queued: 0, sent: 0, message: String(err?.message ?? err) };
  }
}
