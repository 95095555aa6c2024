// One run of the learner's program: started as `node <file>` in the file's
// folder, in a process group of its own, marked so that every process it
// starts can be found again, with its output kept as a tail for failure
// messages. stop() leaves nothing behind.
import { spawn } from 'node:child_process';
import { rmSync } from 'node:fs';
import { StringDecoder } from 'node:string_decoder';
import { basename, dirname } from 'node:path';
import { randomUUID } from 'node:crypto';
import { setTimeout as delay } from 'node:timers/promises';
import { fallbackFor } from './module-fallback.js';
import {
  RUN_MARKER,
  descendantsOf,
  isAlive,
  listProcesses,
  markedProcesses,
  namespacePidOf,
  trySignal,
  workerPidsOf,
} from './processes.js';
import { track, untrack } from './cleanup.js';
import { pollUntil } from './wait.js';

const TAIL_LINES = 200;
let orphansReaped = false;
const MAX_LINE = 2000;
// Variables of the verifier's own process that would confuse a child:
// NODE_CHANNEL_FD (set when the verifier runs under an IPC parent such as a
// test runner's worker) would make the learner's program open a channel
// that is not there; NODE_UNIQUE_ID would make its primary think it is a worker.
const STRIPPED_ENV = ['NODE_CHANNEL_FD', 'NODE_CHANNEL_SERIALIZATION_MODE', 'NODE_UNIQUE_ID', 'WORKERS', 'THREADS'];

export class LearnerProgram {
  /**
   * @param {object} o
   * @param {string} o.file absolute path of the learner's file
   * @param {number} o.port the PORT it must listen on
   * @param {object} o.env the lesson's variables (WORKERS, ...); a value of null removes one
   * @param {(stream: 'stdout'|'stderr', line: string) => void} [o.onLine]
   * @param {string[]} [o.packages] the packages the lesson lets it import (made resolvable, see module-fallback.js)
   * @param {{ argv: string[], forks?: boolean, cpus?: number[] }} [o.prefix] a command that runs node (`taskset -c 0`,
   *   `unshare ... --fork`): the containers lesson's CPU set and PID namespace. forks: node runs as the
   *   prefix's child (unshare --fork), not in its place (exec). The prefix's process leads the group
   *   (signalGroup, processes(), stop() reach everything in it, as without a prefix); `pid` is the primary's.
   *   cpus: the CPUs it confines node to, if any
   * @param {string} [o.host] the address it must listen on, given to it as HOST (and where it is probed);
   *   without it the program is reached at 127.0.0.1 and gets no HOST
   * @param {(o: { file: string }) => Launched} [o.launcher] what node runs instead of the file (the
   *   process-manager lesson: PM2's pm2-runtime, which loads the file in each of its instances). Called once,
   *   here; see Launched below. The launcher's process leads the group and is `pid` (the primary: PM2 is
   *   the cluster primary of the instances)
   *
   * @typedef {object} Launched
   * @property {string[]} argv node's arguments instead of the file (`[pm2-runtime, 'start', 'ecosystem.config.cjs']`)
   * @property {string} shown the command as the learner would type it (`npx pm2-runtime start ecosystem.config.cjs`)
   * @property {object} [env] variables it adds (shown in the command line: PM2_HOME ...)
   * @property {string} [dir] a temporary folder of its own, removed once every process of the run has ended
   */
  constructor({ file, port, env = {}, onLine = () => {}, packages = [], prefix = null, host = null, launcher = null }) {
    this.file = file;
    this.host = host;
    this.launched = launcher ? launcher({ file }) : null;
    this.prefix = prefix;
    this.packages = packages;
    this.port = port;
    this.lessonEnv = env;
    this.onLine = onLine;
    this.mark = `${process.pid}:${randomUUID()}`;
    this.tail = [];
    this.exit = null; // { code, signal } once the primary has exited
    this.child = null;
  }

  /** The primary's pid: node's (with a prefix, the prefix's child: unshare --fork runs it as its only child). */
  get pid() {
    if (!this.prefix?.forks || !this.child?.pid) return this.child?.pid;
    this.primary ??= primaryUnder(this.child.pid);
    // Until the prefix has started node, the leader stands in (signals to it
    // are then the prefix's, which --kill-child passes on as SIGKILL).
    return this.primary ?? this.child.pid;
  }

  /** The process that leads the program's group: the prefix's when there is one, else the primary. */
  get leaderPid() {
    return this.child?.pid;
  }

  get exited() {
    return this.exit !== null;
  }

  /** The environment the program sees, as the learner would set it in a shell. */
  shownEnv() {
    const shown = this.host ? { HOST: this.host, PORT: String(this.port) } : { PORT: String(this.port) };
    for (const [k, v] of Object.entries({ ...this.lessonEnv, ...this.launched?.env })) if (v !== null && v !== undefined) shown[k] = String(v);
    return shown;
  }

  /** The shell command that starts the program the same way, for failure messages. */
  commandLine() {
    const vars = Object.entries(this.shownEnv()).map(([k, v]) => `${k}=${v}`);
    const prefix = (this.prefix?.argv ?? []).map(quote).join(' ');
    const command = this.launched ? this.launched.shown : `node ${quote(basename(this.file))}`;
    return `${vars.join(' ')} ${prefix ? `${prefix} ` : ''}${command}`;
  }

  start() {
    // Whatever starts a learner program (verify, run, bench) first ends what a
    // SIGKILLed verifier left running, once per process.
    if (!orphansReaped) {
      orphansReaped = true;
      reapOrphans();
    }
    const folder = dirname(this.file);
    const fallback = fallbackFor(this.file, this.packages);
    // The fallback's resolve hook runs on a loader thread of its own, in the
    // main thread and in every worker thread the program starts (they inherit
    // its execArgv): OS threads the program did not make.
    this.loaderThreadsPerThread = fallback.execArgv.length > 0 ? 1 : 0;
    const env = { ...process.env };
    for (const name of STRIPPED_ENV) delete env[name];
    Object.assign(env, fallback.env, { [RUN_MARKER]: this.mark });
    for (const [k, v] of Object.entries(this.shownEnv())) env[k] = v;

    const argv = [process.execPath, ...fallback.execArgv, ...(this.launched?.argv ?? [this.file])];
    const [command, ...args] = [...(this.prefix?.argv ?? []), ...argv];
    this.spawnEnv = env; // for runTool: a tool talks to the program with the same variables
    this.child = spawn(command, args, {
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
    await delay(25);
    while (performance.now() < deadline) {
      const since = performance.now() - (this.lastLineAt ?? 0);
      if (since >= quietMs) return;
      await delay(Math.min(quietMs - since, deadline - performance.now()) + 1);
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
    const leader = this.leaderPid;
    if (leader) {
      for (const p of procs) if (p.pgid === leader || p.pid === leader) found.set(p.pid, p);
      for (const p of descendantsOf(leader, procs)) found.set(p.pid, p);
    }
    if (includeMarked) for (const p of markedProcesses(this.mark)) found.set(p.pid, p);
    return [...found.values()];
  }

  /**
   * This machine's pid of the program's process whose own process.pid (the
   * "pid" of its answers) is `pid`. The same number, except in a PID
   * namespace (a prefix that forks: unshare), where the primary is 1 and its
   * workers count from 2; undefined when no live process of the program has it.
   */
  hostPidOf(pid) {
    if (!this.prefix?.forks || pid === undefined) return pid;
    return this.processes({ includeMarked: false }).find((p) => p.pid !== this.leaderPid && namespacePidOf(p.pid) === pid)?.pid;
  }

  signalPrimary(signal) {
    return this.pid ? trySignal(this.pid, signal) : false;
  }

  /** What Ctrl-C in a terminal does: the signal reaches every process of the group. */
  signalGroup(signal) {
    return this.leaderPid ? trySignal(-this.leaderPid, signal) : false;
  }

  /** The exit ({ code, signal }), or null when it has not exited within timeoutMs. */
  async waitForExit(timeoutMs) {
    if (this.exited || !this.child) return this.exit;
    const cancel = new AbortController();
    const timedOut = delay(timeoutMs, null, { signal: cancel.signal }).catch(() => null);
    try {
      return await Promise.race([this.exitPromise, timedOut]);
    } finally {
      cancel.abort();
    }
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
    this.removeLauncherDir();
    untrack(this);
  }

  /** Synchronous last resort, for process 'exit' handlers: kill without waiting. */
  killNow() {
    if (!this.child) return;
    this.signalGroup('SIGKILL');
    for (const p of this.processes()) trySignal(p.pid, 'SIGKILL');
    this.removeLauncherDir();
  }

  removeLauncherDir() {
    if (this.launched?.dir) rmSync(this.launched.dir, { recursive: true, force: true });
  }

  /**
   * Runs `node <argv>` beside the program, in its folder and with its
   * variables (the run marker included, so stop() ends it like the program's
   * own processes), in a process group of its own: the process-manager
   * lesson's `pm2 reload all`. Never throws; resolves { code, signal, stdout,
   * stderr, ms, timedOut } once it has exited, or was killed (its whole group)
   * at timeoutMs or when `signal` aborts.
   */
  runTool(argv, { timeoutMs = 30000, signal } = {}) {
    const started = performance.now();
    return new Promise((resolve) => {
      const out = { stdout: '', stderr: '' };
      let child;
      try {
        child = spawn(process.execPath, argv, { cwd: dirname(this.file), env: this.spawnEnv ?? process.env, detached: true, stdio: ['ignore', 'pipe', 'pipe'] });
      } catch (err) {
        resolve({ code: null, signal: null, ...out, stderr: err.message, ms: 0, timedOut: false });
        return;
      }
      let timedOut = false;
      const kill = () => child.pid && trySignal(-child.pid, 'SIGKILL');
      const timer = setTimeout(() => {
        timedOut = true;
        kill();
      }, timeoutMs);
      signal?.addEventListener('abort', kill, { once: true });
      // Its own group, so a verifier that ends (Ctrl-C to jest, an uncaught
      // error) must end it too: a `pm2 reload all` outlived an interrupted
      // test run, waiting on a daemon that was gone.
      const tracked = { killNow: kill, stop: async () => kill() };
      track(tracked);
      for (const name of ['stdout', 'stderr']) {
        child[name].setEncoding('utf8');
        child[name].on('data', (d) => (out[name] += d));
      }
      let finished = false;
      const done = (code, sig, error) => {
        if (finished) return;
        finished = true;
        clearTimeout(timer);
        signal?.removeEventListener('abort', kill);
        untrack(tracked);
        resolve({ code, signal: sig, stdout: out.stdout, stderr: out.stderr + (error ? error.message : ''), ms: Math.round(performance.now() - started), timedOut });
      };
      child.on('error', (err) => done(null, null, err));
      child.on('close', (code, sig) => done(code, sig));
      // A process it started in the background may hold its output open: the exit is enough, after a moment for the output.
      child.on('exit', (code, sig) => setTimeout(() => done(code, sig), 300).unref());
    });
  }
}

/** Kills processes left by verifier runs whose verifier no longer exists (it was SIGKILLed). */
export function reapOrphans() {
  const reaped = [];
  for (const p of markedProcesses()) {
    const owner = Number(p.mark.split(':')[0]);
    if (Number.isInteger(owner) && owner !== process.pid && !isAlive(owner)) {
      // A marked leader of its own group takes the group with it: a helper's
      // processes that do not carry the mark themselves (nginx's workers).
      if (p.pgid === p.pid) trySignal(-p.pid, 'SIGKILL');
      if (trySignal(p.pid, 'SIGKILL')) reaped.push(p.pid);
    }
  }
  return reaped;
}

async function waitUntil(predicate, timeoutMs, intervalMs = 25) {
  return (await pollUntil(predicate, { timeoutMs, intervalMs })).ok;
}

/** "exited with code 1", "was killed by SIGKILL", "could not start (...)": an exit in words. */
export function describeExit(exit) {
  if (!exit) return 'stopped';
  if (exit.error) return `could not start (${exit.error.message})`;
  return exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`;
}

/** The one child of a prefix process (the node it started), or undefined before it exists. */
function primaryUnder(leader) {
  return listProcesses().find((p) => p.ppid === leader)?.pid;
}

function quote(s) {
  return /^[\w./-]+$/.test(s) ? s : `'${s.replace(/'/g, "'\\''")}'`;
}
