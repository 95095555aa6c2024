// What a verifier step gets: the running program, an HTTP client bound to
// its port, the process table, fault injection, and bounded waiting. Steps
// use these instead of sleeping or spawning anything themselves.
import { availableParallelism } from 'node:os';
import { LearnerProgram } from './program.js';
import { request, curlFor, describeResult } from './http.js';
import { freePort } from './ports.js';
import { StepFailure } from './failure.js';
import { waitUntilReady, PortTaken } from './readiness.js';
import { startLoad } from './load.js';

const PORT_ATTEMPTS = 3;

export class StepContext {
  constructor({ file, lessonEnv, reporter, store, readyTimeoutMs, verifier, options = {} }) {
    this.file = file;
    this.lessonEnv = lessonEnv;
    this.reporter = reporter;
    this.store = store; // measurements kept between lessons (lesson 1's throughput)
    this.readyTimeoutMs = readyTimeoutMs;
    this.verifier = verifier;
    this.program = null;
    this.signal = new AbortController().signal;
    this.data = {}; // what one step leaves for the next
    this.options = options; // from the command line, e.g. { seed } for the capstone
    this.attachments = {};
    this.teardowns = []; // synchronous undo for what outlives a step (a sampler spanning steps)
  }

  /** Runs fn when the run ends, whatever the verdict. */
  onTeardown(fn) {
    this.teardowns.push(fn);
  }

  get port() {
    return this.program?.port;
  }

  get primaryPid() {
    return this.program?.pid;
  }

  /** The number of workers the program was asked for (availableParallelism() when WORKERS is unset). */
  get expectedWorkers() {
    const env = this.program?.lessonEnv ?? this.lessonEnv;
    if (env.WORKERS === undefined || env.WORKERS === null) {
      return this.verifier.clustered === false ? 0 : availableParallelism();
    }
    return Number(env.WORKERS);
  }

  log(message) {
    this.reporter.stepLog(message);
  }

  /**
   * Adds a field to this step's entry in the JSON report (the capstone's
   * scorecard), whether the step passes or fails.
   */
  attach(name, value) {
    this.attachments[name] = value;
  }

  /** For the runner: the fields attached during the step that just ended. */
  takeAttachments() {
    const taken = this.attachments;
    this.attachments = {};
    return taken;
  }

  /**
   * Starts the learner's program (stopping one that runs) and waits until it
   * answers over HTTP. env is merged over the lesson's variables; a null
   * value removes a variable (to start it without WORKERS).
   */
  async start(env = {}) {
    const lessonEnv = { ...this.lessonEnv, ...env };
    let early = this.takePrestarted(lessonEnv);
    if (this.program) await this.stopProgram();
    if (early === null) await this.stopPrestarted(); // one with other variables
    // Another program may take the chosen port before the learner's listen
    // (ports are shared with everything on the machine): start again on
    // another port, a few times, rather than blame the learner.
    for (let attempt = 1; ; attempt++) {
      if (early) {
        this.program = early;
        early = undefined;
        this.log(`$ ${this.program.commandLine()}   (started during the previous step)`);
      } else {
        const port = await freePort();
        this.program = new LearnerProgram({
          file: this.file,
          port,
          env: lessonEnv,
          onLine: (stream, line) => this.reporter.programLine(stream, line),
        });
        this.log(`$ ${this.program.commandLine()}`);
        this.program.start();
      }
      try {
        // The answer that proved readiness, for the boot step to check.
        this.readyAnswer = await waitUntilReady(this, { timeoutMs: this.readyTimeoutMs });
        return this.program;
      } catch (err) {
        if (!(err instanceof PortTaken)) throw err;
        await this.stopProgram();
        if (attempt >= PORT_ATTEMPTS) {
          throw new StepFailure(`Another program took the port the verifier chose, ${PORT_ATTEMPTS} times in a row.`, {
            expected: 'a free port for your program',
            actual: `each chosen port was taken before your program listened on it (last: ${err.port})`,
            explanation: 'This is not your program\'s fault: something on this machine keeps grabbing free ports. Stop other servers you started and verify again.',
          });
        }
        this.log(`port ${err.port} was taken by another program before yours listened on it; starting it again on another port`);
      }
    }
  }

  async stopProgram(options) {
    const program = this.program;
    this.program = null;
    if (program) await program.stop(options);
    await this.stopPrestarted(options);
  }

  /**
   * Spawns now the program that the next start(env) will use, so that its
   * start-up overlaps a wait of the current step (a graceful shutdown that
   * takes a second). start() still waits until it is ready; stopProgram()
   * (and so the runner's teardown) stops it if it was never used.
   */
  async prestart(env = {}) {
    await this.stopPrestarted();
    const lessonEnv = { ...this.lessonEnv, ...env };
    const program = new LearnerProgram({
      file: this.file,
      port: await freePort(),
      env: lessonEnv,
      onLine: (stream, line) => this.reporter.programLine(stream, line),
    });
    this.log(`$ ${program.commandLine()}   (started now for the next round)`);
    this.prestarted = program.start();
  }

  /** The prestarted program if it has these variables (and is alive), else null; undefined when there is none. */
  takePrestarted(lessonEnv) {
    const program = this.prestarted;
    if (!program) return undefined;
    const same = JSON.stringify(program.lessonEnv) === JSON.stringify(lessonEnv) && !program.exited;
    if (!same) return null;
    this.prestarted = null;
    return program;
  }

  async stopPrestarted(options) {
    const program = this.prestarted;
    this.prestarted = null;
    if (program) await program.stop(options);
  }

  /** A raw request to the program: never throws (see http.js). */
  request(path, options = {}) {
    return request(this.port, path, { signal: this.signal, ...options });
  }

  /**
   * A request that must answer 200 with JSON carrying a pid; anything else
   * fails the step with the curl command that shows it.
   */
  async get(path, options = {}) {
    const r = await this.request(path, options);
    this.expectJson(r, { status: options.status ?? 200 });
    return r;
  }

  expectJson(r, { status = 200 } = {}) {
    const reproduce = curlFor(r);
    if (!r.ok) {
      throw new StepFailure(`${r.method} ${pathOf(r.url)} got no answer.`, {
        expected: `status ${status} with a JSON body`,
        actual: r.error,
        reproduce,
        showOutput: true,
      });
    }
    if (r.status !== status) {
      throw new StepFailure(`${r.method} ${pathOf(r.url)} answered status ${r.status}.`, {
        expected: `status ${status}`,
        actual: describeResult(r),
        reproduce,
        hint: r.status === 404 ? `add a route for ${r.method} ${pathOf(r.url).split('?')[0]}.` : undefined,
        showOutput: r.status >= 500,
      });
    }
    if (r.json === undefined || typeof r.json !== 'object' || r.json === null) {
      throw new StepFailure(`${r.method} ${pathOf(r.url)} did not answer JSON.`, {
        expected: 'a JSON object such as {"pid":1234}',
        actual: describeResult(r),
        reproduce,
        hint: 'answer with res.json({ pid: process.pid, ... }).',
      });
    }
    if (r.pid === undefined) {
      throw new StepFailure(`${r.method} ${pathOf(r.url)} answered without "pid".`, {
        expected: 'a JSON object with "pid": the process.pid of the process that served it',
        actual: describeResult(r),
        reproduce,
        hint: 'every response carries pid: process.pid, so the verifier can see which process served it.',
      });
    }
    return r;
  }

  curl(path, options) {
    return curlFor({ method: 'GET', url: `http://127.0.0.1:${this.port}${path}`, ...options });
  }

  workers() {
    return this.program?.workers() ?? [];
  }

  /** Continuous fresh-connection load that ends with the step at the latest (see load.js). */
  startLoad(options = {}) {
    return startLoad(this.port, { signal: this.signal, ...options });
  }

  /**
   * Waits until every current worker has answered a request, so a step does
   * not race replacements that exist but do not listen yet. Returns the pids
   * that never answered (empty when all did).
   */
  async waitAllAnswering({ timeoutMs = 3000 } = {}) {
    const answered = new Set();
    const started = performance.now();
    for (;;) {
      const silent = this.workers().filter((pid) => !answered.has(pid));
      if (silent.length === 0) return [];
      if (performance.now() - started > timeoutMs) return silent;
      const r = await this.request('/', { timeoutMs: 1000 });
      if (r.pid !== undefined) answered.add(r.pid);
      else await sleepFor(20, this.signal);
    }
  }

  /**
   * Polls fn every intervalMs until it returns a truthy value or timeoutMs
   * passes. Returns { ok, value, ms } with the last value seen.
   */
  async poll(fn, { timeoutMs, intervalMs = 20 }) {
    const started = performance.now();
    let value;
    for (;;) {
      this.signal.throwIfAborted();
      value = await fn();
      const ms = Math.round(performance.now() - started);
      if (value) return { ok: true, value, ms };
      if (ms >= timeoutMs) return { ok: false, value, ms };
      await sleepFor(intervalMs, this.signal);
    }
  }

  /** Waits until exactly n workers are alive; returns { ok, value: pids, ms }. */
  waitForWorkers(n, { timeoutMs = 3000, accept = () => true } = {}) {
    let last = [];
    return this.poll(
      () => {
        last = this.workers();
        return last.length === n && accept(last) ? last : null;
      },
      { timeoutMs },
    ).then((r) => ({ ...r, value: r.ok ? r.value : last }));
  }

  /**
   * Sends fresh-connection requests until `count` distinct pids have
   * answered or maxRequests were sent. Returns { pids: Map<pid, n>, results }.
   */
  async reachWorkers(path, { count, maxRequests = 60, concurrency = 1 } = {}) {
    const pids = new Map();
    const results = [];
    let sent = 0;
    const worker = async () => {
      while (sent < maxRequests && pids.size < count) {
        sent += 1;
        const r = await this.request(path, { timeoutMs: 3000 });
        results.push(r);
        if (r.pid !== undefined) pids.set(r.pid, (pids.get(r.pid) ?? 0) + 1);
      }
    };
    await Promise.all(Array.from({ length: concurrency }, worker));
    return { pids, results };
  }

  killWorker(pid, signal = 'SIGKILL') {
    const workers = this.workers();
    if (!workers.includes(pid)) throw new Error(`pid ${pid} is not a worker of this program`);
    this.log(`kill -${signal.replace(/^SIG/, '')} ${pid}   (a worker)`);
    process.kill(pid, signal);
  }

  signalPrimary(signal) {
    this.log(`kill -${signal.replace(/^SIG/, '')} ${this.primaryPid}   (the primary)`);
    return this.program.signalPrimary(signal);
  }

  signalGroup(signal) {
    this.log(`kill -${signal.replace(/^SIG/, '')} -${this.primaryPid}   (the whole process group, as Ctrl-C does)`);
    return this.program.signalGroup(signal);
  }

  fail(message, o) {
    throw new StepFailure(message, o);
  }
}

function pathOf(url) {
  return url.replace(/^http:\/\/[^/]+/, '');
}

export function sleepFor(ms, signal) {
  return new Promise((resolve, reject) => {
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
