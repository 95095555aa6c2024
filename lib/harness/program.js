// One run of the learner's program: started as `node <file>` in the file's
// folder, in a process group of its own, marked so that every process it
// starts can be found again, with its output kept as a tail for failure
// messages. stop() leaves nothing behind.
import { spawn } from 'node:child_process';
import { StringDecoder } from 'node:string_decoder';
import { basename, dirname } from 'node:path';
import { randomUUID } from 'node:crypto';
import { fallbackFor } from './module-fallback.js';
import {
  RUN_MARKER,
  descendantsOf,
  isAlive,
  listProcesses,
  markedProcesses,
  trySignal,
  workerPidsOf,
} from './processes.js';
import { track, untrack } from './cleanup.js';

const TAIL_LINES = 200;
let orphansReaped = false;
const MAX_LINE = 2000;
// Variables of the verifier's own process that would confuse a child:
// NODE_CHANNEL_FD (set when the verifier runs under an IPC parent such as a
// test runner's worker) would make the learner's program open a channel
// that is not there; NODE_UNIQUE_ID would make its primary think it is a worker.
const STRIPPED_ENV = ['NODE_CHANNEL_FD', 'NODE_CHANNEL_SERIALIZATION_MODE', 'NODE_UNIQUE_ID', 'WORKERS'];

export class LearnerProgram {
  /**
   * @param {object} o
   * @param {string} o.file absolute path of the learner's file
   * @param {number} o.port the PORT it must listen on
   * @param {object} o.env the lesson's variables (WORKERS, ...); a value of null removes one
   * @param {(stream: 'stdout'|'stderr', line: string) => void} [o.onLine]
   */
  constructor({ file, port, env = {}, onLine = () => {} }) {
    this.file = file;
    this.port = port;
    this.lessonEnv = env;
    this.onLine = onLine;
    this.mark = `${process.pid}:${randomUUID()}`;
    this.tail = [];
    this.exit = null; // { code, signal } once the primary has exited
    this.child = null;
  }

  get pid() {
    return this.child?.pid;
  }

  get exited() {
    return this.exit !== null;
  }

  /** The environment the program sees, as the learner would set it in a shell. */
  shownEnv() {
    const shown = { PORT: String(this.port) };
    for (const [k, v] of Object.entries(this.lessonEnv)) if (v !== null && v !== undefined) shown[k] = String(v);
    return shown;
  }

  /** The shell command that starts the program the same way, for failure messages. */
  commandLine() {
    const vars = Object.entries(this.shownEnv()).map(([k, v]) => `${k}=${v}`);
    return `${vars.join(' ')} node ${quote(basename(this.file))}`;
  }

  start() {
    // Whatever starts a learner program (verify, run, bench) first ends what a
    // SIGKILLed verifier left running, once per process.
    if (!orphansReaped) {
      orphansReaped = true;
      reapOrphans();
    }
    const folder = dirname(this.file);
    const fallback = fallbackFor(folder);
    const env = { ...process.env };
    for (const name of STRIPPED_ENV) delete env[name];
    Object.assign(env, fallback.env, { [RUN_MARKER]: this.mark });
    for (const [k, v] of Object.entries(this.shownEnv())) env[k] = v;

    this.child = spawn(process.execPath, [...fallback.execArgv, this.file], {
      cwd: folder,
      env,
      detached: true, // its own process group (and session): signals to the verifier do not reach it
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    this.startedAt = performance.now();
    track(this);
    this.exitPromise = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => {
        this.exit = { code, signal };
        resolve(this.exit);
      });
      this.child.on('error', (err) => {
        this.pushLine('stderr', `could not start node: ${err.message}`);
        this.exit = { code: null, signal: null, error: err };
        resolve(this.exit);
      });
    });
    this.readLines(this.child.stdout, 'stdout');
    this.readLines(this.child.stderr, 'stderr');
    return this;
  }

  readLines(stream, name) {
    const decoder = new StringDecoder('utf8');
    let partial = '';
    stream.on('data', (chunk) => {
      const text = partial + decoder.write(chunk);
      const lines = text.split('\n');
      partial = lines.pop();
      if (partial.length > MAX_LINE) {
        lines.push(partial);
        partial = '';
      }
      for (const line of lines) this.pushLine(name, line);
    });
    stream.on('end', () => {
      if (partial) this.pushLine(name, partial);
    });
    stream.on('error', () => {});
  }

  pushLine(stream, line) {
    this.lastLineAt = performance.now();
    const clean = line.replace(/\r$/, '');
    const kept = clean.length > MAX_LINE ? `${clean.slice(0, MAX_LINE)}... (line cut)` : clean;
    this.tail.push(kept);
    if (this.tail.length > TAIL_LINES) this.tail.shift();
    this.onLine(stream, kept);
  }

  /**
   * Resolves once no output has arrived for quietMs (at most maxMs): a worker
   * that just died may still have its error in the pipe, and a failure
   * message should show it.
   */
  async outputSettled({ quietMs = 150, maxMs = 1000 } = {}) {
    const deadline = performance.now() + maxMs;
    // One turn of the event loop at least: what is already in the pipe gets read.
    await new Promise((r) => setTimeout(r, 25));
    while (performance.now() < deadline) {
      const since = performance.now() - (this.lastLineAt ?? 0);
      if (since >= quietMs) return;
      await new Promise((r) => setTimeout(r, Math.min(quietMs - since, deadline - performance.now()) + 1));
    }
  }

  /** The last lines of the program's output, stdout and stderr interleaved. */
  lastLines(n = 15) {
    return this.tail.slice(-n);
  }

  /** The lines that most likely show why it failed: an error with its stack, else the last lines. */
  telltaleLines(n = 15) {
    const errorAt = this.tail.findIndex((l) =>
      /(Error|EADDRINUSE|EACCES|Cannot find|is not defined|Unexpected|throw|^\s+\^)/.test(l),
    );
    if (errorAt === -1) return this.lastLines(n);
    const from = Math.max(0, errorAt - 4);
    return this.tail.slice(from, from + n);
  }

  /** Pids of the cluster workers right now, from the process table. */
  workers() {
    if (!this.pid || this.exited) return [];
    return workerPidsOf(this.pid);
  }

  /**
   * Every live process of this run: the group and its descendants, and with
   * includeMarked (slower: reads every process's environment) marked
   * stragglers that left both.
   */
  processes({ includeMarked = true } = {}) {
    const procs = listProcesses();
    const found = new Map();
    if (this.pid) {
      for (const p of procs) if (p.pgid === this.pid || p.pid === this.pid) found.set(p.pid, p);
      for (const p of descendantsOf(this.pid, procs)) found.set(p.pid, p);
    }
    if (includeMarked) for (const p of markedProcesses(this.mark)) found.set(p.pid, p);
    return [...found.values()];
  }

  signalPrimary(signal) {
    return this.pid ? trySignal(this.pid, signal) : false;
  }

  /** What Ctrl-C in a terminal does: the signal reaches every process of the group. */
  signalGroup(signal) {
    return this.pid ? trySignal(-this.pid, signal) : false;
  }

  waitForExit(timeoutMs) {
    if (this.exited || !this.child) return Promise.resolve(this.exit);
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(null), timeoutMs);
      this.exitPromise.then((e) => {
        clearTimeout(timer);
        resolve(e);
      });
    });
  }

  /**
   * Ends every process of the run: SIGTERM to the group, then SIGKILL to
   * whatever is left after graceMs (a program that ignores signals), and to
   * marked processes that left the group. Resolves once none is alive.
   */
  async stop({ graceMs = 1500, force = false } = {}) {
    if (!this.child) return;
    if (!force && this.processes().length > 0) {
      this.signalGroup('SIGTERM');
      for (const p of this.processes()) trySignal(p.pid, 'SIGTERM');
      await waitUntil(() => this.processes().length === 0, graceMs);
    }
    for (let round = 0; round < 50; round++) {
      const left = this.processes();
      if (left.length === 0) break;
      this.signalGroup('SIGKILL');
      for (const p of left) trySignal(p.pid, 'SIGKILL');
      await waitUntil(() => this.processes().length === 0, 100);
    }
    await this.waitForExit(2000);
    this.child.stdout?.destroy();
    this.child.stderr?.destroy();
    untrack(this);
  }

  /** Synchronous last resort, for process 'exit' handlers: kill without waiting. */
  killNow() {
    if (!this.child) return;
    this.signalGroup('SIGKILL');
    for (const p of this.processes()) trySignal(p.pid, 'SIGKILL');
  }
}

/** Kills processes left by verifier runs whose verifier no longer exists (it was SIGKILLed). */
export function reapOrphans() {
  const reaped = [];
  for (const p of markedProcesses()) {
    const owner = Number(p.mark.split(':')[0]);
    if (Number.isInteger(owner) && owner !== process.pid && !isAlive(owner)) {
      if (trySignal(p.pid, 'SIGKILL')) reaped.push(p.pid);
    }
  }
  return reaped;
}

async function waitUntil(predicate, timeoutMs, intervalMs = 25) {
  const deadline = performance.now() + timeoutMs;
  while (!predicate()) {
    if (performance.now() >= deadline) return false;
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  return true;
}

function quote(s) {
  return /^[\w./-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`;
}
