// What the live view shows, gathered from the process table (never from the
// program's log lines): the primary, its workers with uptime and the requests
// each served to our own probes and bursts, restarts, and events (forked,
// answering, died). Fault injection goes through the StepContext, so every
// action is the same `kill` command the verifier would log.
import { EventEmitter } from 'node:events';
import { describeExit } from './boot.js';

const POLL_MS = 250;
const PROBE_TIMEOUT_MS = 1000;
const BURST = { requests: 60, concurrency: 6 };
// A death this soon after we signalled the pid is put down to our signal.
const OWN_SIGNAL_WINDOW_MS = 5000;

export class ClusterObserver extends EventEmitter {
  /**
   * @param {import('../../harness/context.js').StepContext} ctx with a ready program
   * @param {{ probeEveryMs?: number, now?: () => number }} [o] probeEveryMs 0: probe only workers that never answered
   */
  constructor(ctx, { probeEveryMs = 500, now = () => Date.now() } = {}) {
    super();
    this.ctx = ctx;
    this.program = ctx.program;
    this.probeEveryMs = probeEveryMs;
    this.now = now;
    this.startedAt = now();
    this.workers = new Map(); // pid -> { pid, since, requests, answering }
    this.primaryRequests = 0; // answers that carried the primary's own pid
    this.forks = 0;
    this.deaths = 0;
    this.probes = { sent: 0, failed: 0, lastError: null };
    this.events = [];
    this.signalled = new Map(); // pid -> { signal, at }
    this.timers = [];
    this.busy = new Set();
  }

  get expected() {
    return this.ctx.expectedWorkers;
  }

  /** Workers forked beyond the first WORKERS: replacements after deaths or restarts. */
  get restarts() {
    return Math.max(0, this.forks - this.expected);
  }

  start() {
    this.poll();
    this.timers.push(setInterval(() => this.poll(), POLL_MS));
    this.timers.push(setInterval(() => this.probeTick(), this.probeEveryMs || POLL_MS));
    return this;
  }

  stop() {
    for (const t of this.timers) clearInterval(t);
    this.timers = [];
    this.stopped = true;
  }

  event(kind, text) {
    const e = { at: this.now(), kind, text };
    this.events.push(e);
    if (this.events.length > 200) this.events.shift();
    this.emit('event', e);
    this.emit('change');
  }

  poll() {
    if (this.stopped || this.program.exited) return;
    const pids = new Set(this.program.workers());
    for (const [pid, w] of this.workers) {
      if (pids.has(pid)) continue;
      this.workers.delete(pid);
      this.deaths += 1;
      this.event('died', `worker ${pid} died after ${formatDuration(this.now() - w.since)} ${this.causeOfDeath(pid)}`);
    }
    for (const pid of pids) {
      if (this.workers.has(pid)) continue;
      this.forks += 1;
      this.workers.set(pid, { pid, since: this.now(), requests: 0, answering: false });
      this.event('forked', `worker ${pid} forked${this.forks > this.expected ? ' (a replacement)' : ''}`);
    }
  }

  // Only the primary (its parent) learns a worker's exit code; from outside
  // we know the signal when it was ours, and otherwise say where to look.
  causeOfDeath(pid) {
    const sent = this.signalled.get(pid);
    this.signalled.delete(pid);
    if (sent && this.now() - sent.at < OWN_SIGNAL_WINDOW_MS) return `(${sent.signal}, sent from here)`;
    return "(code/signal: your primary's 'exit' event)";
  }

  /** Counts one answer for the worker whose pid it carries. */
  record(result) {
    if (result.code === 'ABORTED' || this.stopped) return; // we stopped it, not the program
    this.probes.sent += 1;
    if (result.pid === undefined) {
      this.probes.failed += 1;
      const error = result.ok ? `status ${result.status}, no pid in the answer` : result.error;
      if (error !== this.probes.lastError) this.event('probe', `GET / failed: ${error}`);
      this.probes.lastError = error;
      return;
    }
    if (this.probes.lastError) this.event('probe', 'GET / answers again');
    this.probes.lastError = null;
    const w = this.workers.get(result.pid);
    if (!w) {
      if (result.pid === this.program.pid) {
        this.primaryRequests += 1;
        // Normal for a single process (lesson 1); a finding for a cluster.
        if (this.expected > 0) this.noteOnce('primary-answers', `the primary (${result.pid}) answered a request itself`);
      }
      this.emit('change');
      return;
    }
    w.requests += 1;
    if (!w.answering) {
      w.answering = true;
      this.event('listening', `worker ${w.pid} is listening (answered its first request)`);
    }
    this.emit('change');
  }

  noteOnce(key, text) {
    this.noted ??= new Set();
    if (this.noted.has(key)) return;
    this.noted.add(key);
    this.event('note', text);
  }

  async probeTick() {
    if (this.stopped || this.program.exited || this.busy.has('probe')) return;
    // Without regular probes, only ask until every worker has answered once.
    if (!this.probeEveryMs && [...this.workers.values()].every((w) => w.answering)) return;
    this.busy.add('probe');
    try {
      this.record(await this.ctx.request('/', { timeoutMs: PROBE_TIMEOUT_MS }));
    } finally {
      this.busy.delete('probe');
    }
  }

  /** A burst of fresh-connection requests; reports how they spread over the workers. */
  async burst({ requests = BURST.requests, concurrency = BURST.concurrency } = {}) {
    if (this.busy.has('burst') || this.program.exited) return null;
    this.busy.add('burst');
    this.event('action', `burst: ${requests} requests to GET /, ${concurrency} at a time`);
    const per = new Map();
    let failed = 0;
    let sent = 0;
    const loop = async () => {
      while (sent < requests && !this.stopped) {
        sent += 1;
        const r = await this.ctx.request('/', { timeoutMs: 3000 });
        this.record(r);
        if (r.pid === undefined) failed += 1;
        else per.set(r.pid, (per.get(r.pid) ?? 0) + 1);
      }
    };
    try {
      await Promise.all(Array.from({ length: concurrency }, loop));
    } finally {
      this.busy.delete('burst');
    }
    const spread = [...per].map(([pid, n]) => `${pid}:${n}`).join(' ');
    this.event('result', `burst done: ${requests - failed} answered${failed ? `, ${failed} failed` : ''}; ${spread || 'no worker answered'}`);
    return { per, failed };
  }

  killRandomWorker(signal = 'SIGKILL') {
    const pids = this.program.workers();
    if (pids.length === 0) {
      this.event('action', 'no worker to kill');
      return null;
    }
    const pid = pids[Math.floor(Math.random() * pids.length)];
    this.signalled.set(pid, { signal, at: this.now() });
    try {
      this.ctx.killWorker(pid, signal);
    } catch (err) {
      this.event('action', `could not signal ${pid}: ${err.message}`);
    }
    return pid;
  }

  signalPrimary(signal) {
    this.ctx.signalPrimary(signal);
  }

  /** When the primary has exited: the event that says how. */
  primaryExited() {
    this.poll();
    this.event('exit', `the primary ${this.program.pid} ${describeExit(this.program.exit)}`);
  }
}

export function formatDuration(ms) {
  const s = Math.floor(ms / 1000);
  if (s < 60) return `${s}s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m}m${String(s % 60).padStart(2, '0')}s`;
  return `${Math.floor(m / 60)}h${String(m % 60).padStart(2, '0')}m`;
}
