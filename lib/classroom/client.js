// The learner's side of a classroom: joining, reporting each verify outcome,
// and leaving. The join (address, code, name, learner key) and the queue of
// results not yet sent live in one small file: classroom.json in the
// workspace folder when there is one, else in the user's config folder.
// Reporting never throws and never takes longer than a short budget: what
// cannot be sent now is queued and goes with a later verify.
import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { homedir } from 'node:os';
import { dirname, join } from 'node:path';
import { request } from '../harness/http.js';
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
    const tmp = `${file}.${process.pid}.tmp`;
    writeFileSync(tmp, `${JSON.stringify(info, null, 2)}\n`, { mode: 0o600 });
    renameSync(tmp, file);
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

function post(target, path, body, { code, timeoutMs }) {
  return request(target.port, `${target.prefix}${path}`, { host: target.host, method: 'POST', body, timeoutMs, headers: { 'x-join-code': code } });
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
  return { file, info, previous };
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
 * is spent. Returns { sent, dropped, outcome, detail } where outcome is
 * 'sent' | 'unreachable' | 'refused' | 'busy'.
 */
export async function flushQueue(info, { deadline, timeoutMs = REPORT_BUDGET_MS }) {
  const target = parseClassroomUrl(info.url);
  let sent = 0;
  let dropped = 0;
  while (info.queue.length) {
    const left = deadline - Date.now();
    if (left < 50) return { sent, dropped, outcome: 'unreachable', detail: `no answer from ${target.base} in time` };
    const batch = info.queue.slice(0, LIMITS.maxReportsPerRequest);
    const r = await post(target, '/api/reports', { learner: info.learner, key: info.key, reports: batch }, { code: info.code, timeoutMs: Math.min(left, timeoutMs) });
    if (!r.ok) return { sent, dropped, outcome: 'unreachable', detail: unreachable(r, target.base) };
    if (r.status === 200) {
      info.queue.splice(0, batch.length);
      sent += batch.length;
    } else if (r.status === 400) {
      // A result this classroom will never take (a lesson it does not know):
      // find it by sending one at a time, drop it, keep the others.
      if (batch.length === 1) {
        info.queue.shift();
        dropped += 1;
      } else {
        const single = await post(target, '/api/reports', { learner: info.learner, key: info.key, reports: [batch[0]] }, { code: info.code, timeoutMs: Math.min(Math.max(deadline - Date.now(), 50), timeoutMs) });
        if (!single.ok) return { sent, dropped, outcome: 'unreachable', detail: unreachable(single, target.base) };
        if (single.status !== 200 && single.status !== 400) return { sent, dropped, outcome: 'busy', detail: `status ${single.status}` };
        info.queue.shift();
        if (single.status === 200) sent += 1;
        else dropped += 1;
      }
    } else if (r.status === 401 || r.status === 403) {
      return { sent, dropped, outcome: 'refused', detail: `${target.base} no longer accepts your join` };
    } else {
      return { sent, dropped, outcome: 'busy', detail: `${target.base} answered ${r.status}` };
    }
  }
  return { sent, dropped, outcome: 'sent' };
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
    info.queue.push({
      id: randomBytes(12).toString('base64url'),
      lesson,
      passed: Boolean(report.passed),
      failedStep: report.passed ? null : (failed?.id ?? 'starts'),
      durationMs: Math.max(0, Math.round(report.durationMs ?? 0)),
      attempt,
      at: new Date().toISOString(),
    });
    const overflow = info.queue.length - MAX_QUEUE;
    if (overflow > 0) info.queue.splice(0, overflow);

    const result = await flushQueue(info, { deadline });
    let saveProblem = null;
    try {
      saveJoin(file, info);
    } catch (err) {
      saveProblem = err.message;
    }
    const queued = info.queue.length;
    let message;
    if (result.outcome === 'sent') message = `result sent to ${info.title ? `"${info.title}"` : info.url}${result.sent > 1 ? ` (with ${result.sent - 1} queued before)` : ''}.`;
    else if (result.outcome === 'refused') message = `${result.detail} (the instructor may have started a new class). Run cluster-workshop join again, or cluster-workshop leave. ${queued} result(s) kept.`;
    else message = `${result.detail}; ${queued} result(s) queued, sent with your next verify.`;
    if (result.dropped) message += ` ${result.dropped} result(s) the classroom does not take were dropped.`;
    if (saveProblem) message += ` ${saveProblem}`;
    say(message);
    return { outcome: result.outcome, queued, sent: result.sent, message };
  } catch (err) {
    say(err instanceof ClassroomError ? err.message : `reporting failed (${err?.message ?? err}); your verify result is unchanged.`);
    return { outcome: 'error', queued: 0, sent: 0, message: String(err?.message ?? err) };
  }
}
