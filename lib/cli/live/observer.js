// What the live view shows, gathered from the process table and our own
// requests (never from the program's log lines): the primary, its workers
// with uptime and the requests each served to our probes and bursts,
// restarts, and events (forked, listening, exited). Fault injection goes
// through the StepContext, so every action is the same `kill` command the
// verifier would log.
//
// When a worker listens: the cluster's own 'listening' event happens inside
// the learner's primary, which runs as plain `node server.js` (no preload),
// so it is not seen from here. Round robin gives each new connection to the
// next listening worker, so a round of (workers + 1) fresh connections
// reaches every worker that listens: while a worker has not answered, every
// tick sends such a round, and a worker counts as listening from the first
// round it answers, within one tick of its 'listening' event. A death seen
// while a worker has not answered waits for one more round first, so the
// events come in the order they happened: a correct rolling restart reads
// "listening" for the replacement before "exited" for the worker it replaces.
import { EventEmitter } from 'node:events';
import { describeExit } from '../../harness/program.js';

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
    this.primarySignalled = null; // { signal, at }: the last signal sent to the primary from here
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

  async poll() {
    if (this.stopped || this.program.exited || this.busy.has('poll')) return;
    this.busy.add('poll');
    try {
      const pids = new Set(this.program.workers());
      for (const pid of pids) {
        if (this.workers.has(pid)) continue;
        this.forks += 1;
        this.workers.set(pid, { pid, since: this.now(), requests: 0, answering: false });
        this.event('forked', `worker ${pid} forked${this.forks > this.expected ? ' (a replacement)' : ''}`);
      }
      const gone = [...this.workers.values()].filter((w) => !pids.has(w.pid));
      if (gone.length === 0) return;
      // A worker that listened before these exited must say so first.
      if ([...this.workers.values()].some((w) => pids.has(w.pid) && !w.answering)) await this.probeRound();
      for (const w of gone) {
        this.workers.delete(w.pid);
        this.deaths += 1;
        this.event('died', `worker ${w.pid} exited after ${formatDuration(this.now() - w.since)}${this.causeOfDeath(w.pid)}`);
      }
    } finally {
      this.busy.delete('poll');
    }
  }

  // Only the primary (its parent) learns a worker's exit code and signal; from
  // here we know only what we sent, to it or to its primary.
  causeOfDeath(pid) {
    const sent = this.signalled.get(pid);
    this.signalled.delete(pid);
    if (sent && this.now() - sent.at < OWN_SIGNAL_WINDOW_MS) return ` (${sent.signal}, sent from here)`;
    const toPrimary = this.primarySignalled;
    if (toPrimary && this.now() - toPrimary.at < OWN_SIGNAL_WINDOW_MS) return `, after the ${toPrimary.signal} sent to the primary`;
    return '';
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
        // Normal for a single process (the bottleneck lesson); a finding for a cluster.
        if (this.expected > 0) this.noteOnce('primary-answers', `the primary (${result.pid}) answered a request itself`);
      }
      this.emit('change');
      return;
    }
    w.requests += 1;
    if (!w.answering) {
      w.answering = true;
      this.event('listening', `worker ${w.pid} is listening (answers after ${formatDuration(this.now() - w.since)})`);
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
    const waiting = [...this.workers.values()].some((w) => !w.answering);
    // Without regular probes, only ask until every worker has answered once.
    if (!this.probeEveryMs && !waiting) return;
    this.busy.add('probe');
    try {
      if (waiting) await this.probeRound();
      else this.record(await this.ctx.request('/', { timeoutMs: PROBE_TIMEOUT_MS }));
    } finally {
      this.busy.delete('probe');
    }
  }

  /** workers + 1 requests at once on fresh connections: round robin hands one to every listening worker. */
  async probeRound() {
    const n = Math.max(this.workers.size, this.expected) + 1;
    const results = await Promise.all(Array.from({ length: n }, () => this.ctx.request('/', { timeoutMs: PROBE_TIMEOUT_MS })));
    for (const r of results) this.record(r);
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
    this.primarySignalled = { signal, at: this.now() };
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
