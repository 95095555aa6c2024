// A program a verifier needs beside the learner's that is not the learner's
// (a load balancer in front of it): started in a process group of its own,
// with its output kept as a tail, and stopped with everything it started,
// like a LearnerProgram. Its processes are found by its group, so a helper
// that forks (nginx's master and workers) is stopped whole.
//
// The run's mark: a helper inherits RUN_MARKER in its environment like a
// learner's program, but some programs overwrite their environment to show
// a title (nginx's setproctitle). Give such a helper the mark in its
// arguments as well (`markArg`, e.g. an nginx -g directive that sets
// `env CLUSTER_WORKSHOP_RUN=<mark>;`): markedProcesses() reads command lines
// too, so a helper left behind by a killed verifier is still found and
// reaped, its whole group with it.
import { spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { StringDecoder } from 'node:string_decoder';
import { RUN_MARKER, listProcesses, markedProcesses, trySignal } from './processes.js';
import { track, untrack } from './cleanup.js';
import { pollUntil } from './wait.js';

const TAIL_LINES = 200;

export class HelperProcess {
  /**
   * @param {object} o
   * @param {string} o.command the executable
   * @param {string[] | ((mark: string) => string[])} o.args its arguments; a function gets the run's mark
   * @param {string} [o.cwd]
   * @param {object} [o.env] variables over the verifier's own
   * @param {string} [o.name] how failure messages name it ("nginx")
   * @param {(stream: string, line: string) => void} [o.onLine]
   * @param {string} [o.stopSignal] what stop() sends first (default SIGTERM)
   */
  constructor({ command, args = [], cwd, env = {}, name, onLine = () => {}, stopSignal = 'SIGTERM' }) {
    this.command = command;
    this.mark = `${process.pid}:${randomUUID()}`;
    this.args = typeof args === 'function' ? args(this.mark) : args;
    this.cwd = cwd;
    this.extraEnv = env;
    this.name = name ?? command;
    this.onLine = onLine;
    this.stopSignal = stopSignal;
    this.tail = [];
    this.exit = null;
    this.child = null;
  }

  get pid() {
    return this.child?.pid;
  }

  get exited() {
    return this.exit !== null;
  }

  start() {
    this.child = spawn(this.command, this.args, {
      cwd: this.cwd,
      env: { ...process.env, ...this.extraEnv, [RUN_MARKER]: this.mark },
      detached: true, // its own process group: signals to the verifier do not reach it, and one signal reaches all of it
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    track(this);
    this.exitPromise = new Promise((resolve) => {
      this.child.on('exit', (code, signal) => resolve((this.exit = { code, signal })));
      this.child.on('error', (err) => {
        this.pushLine('stderr', `could not start ${this.command}: ${err.message}`);
        resolve((this.exit = { code: null, signal: null, error: err }));
      });
    });
    for (const name of ['stdout', 'stderr']) {
      const decoder = new StringDecoder('utf8');
      let partial = '';
      this.child[name].on('data', (chunk) => {
        const lines = (partial + decoder.write(chunk)).split('\n');
        partial = lines.pop();
        for (const line of lines) this.pushLine(name, line);
      });
      this.child[name].on('end', () => partial && this.pushLine(name, partial));
      this.child[name].on('error', () => {});
    }
    return this;
  }

  pushLine(stream, line) {
    this.tail.push(line);
    if (this.tail.length > TAIL_LINES) this.tail.shift();
    this.onLine(stream, line);
  }

  /** Every live process of the helper: its group, and marked stragglers. */
  processes() {
    const leader = this.child?.pid;
    if (!leader) return [];
    const found = new Map();
    for (const p of listProcesses()) if (p.pgid === leader || p.pid === leader) found.set(p.pid, p);
    for (const p of markedProcesses(this.mark)) found.set(p.pid, p);
    return [...found.values()];
  }

  /** The exit ({ code, signal }), or null when it has not exited within timeoutMs. */
  async waitForExit(timeoutMs) {
    if (this.exited || !this.child) return this.exit;
    let timer;
    const timedOut = new Promise((resolve) => (timer = setTimeout(() => resolve(null), timeoutMs)));
    try {
      return await Promise.race([this.exitPromise, timedOut]);
    } finally {
      clearTimeout(timer);
    }
  }

  /** stopSignal to the group, SIGKILL to what is left after graceMs; resolves once none is alive. */
  async stop({ graceMs = 1500 } = {}) {
    if (!this.child) return;
    const leader = this.child.pid;
    if (this.processes().length > 0) {
      trySignal(-leader, this.stopSignal);
      await pollUntil(() => this.processes().length === 0, { timeoutMs: graceMs, intervalMs: 25 });
    }
    for (let round = 0; round < 50 && this.processes().length > 0; round++) {
      trySignal(-leader, 'SIGKILL');
      for (const p of this.processes()) trySignal(p.pid, 'SIGKILL');
      await pollUntil(() => this.processes().length === 0, { timeoutMs: 100, intervalMs: 25 });
    }
    await this.waitForExit(2000);
    this.child.stdout?.destroy();
    this.child.stderr?.destroy();
    untrack(this);
  }

  /** Synchronous last resort, for process 'exit' handlers. */
  killNow() {
    if (!this.child) return;
    trySignal(-this.child.pid, 'SIGKILL');
  }
}
