// What a verifier step gets: the running program, an HTTP client bound to
// its port, the process table, fault injection, and bounded waiting. Steps
// use these instead of sleeping or spawning anything themselves.
import { availableParallelism } from 'node:os';
import { LearnerProgram } from './program.js';
import { HelperProcess } from './helper.js';
import { request, curlFor, describeResult } from './http.js';
import { freePort } from './ports.js';
import { StepFailure } from './failure.js';
import { waitUntilReady, PortTaken } from './readiness.js';
import { startLoad } from './load.js';
import { sleepFor, pollUntil } from './wait.js';

// Kept for the verifiers that import it from here (verify/capstone.js, verify/shared/inflight.js).
export { sleepFor };

const PORT_ATTEMPTS = 3;

export class StepContext {
  constructor({ file, lessonEnv, reporter, store, readyTimeoutMs, verifier, options = {}, packages = [] }) {
    this.file = file;
    this.packages = packages; // the lesson's packages the program may import
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
    this.others = new Set(); // more runs of the learner's program (startAnother)
    this.helpers = new Set(); // programs that are not the learner's (startHelper)
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
      // Under a CPU set (the containers lesson's taskset), the CPUs the program may use.
      return this.verifier.clustered === false ? 0 : (this.program?.prefix?.cpus?.length ?? availableParallelism());
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
   * value removes a variable (to start it without WORKERS). port: the port
   * of the first try (default: a free one); a port race retries on free ones.
   * prefix: { argv, forks } runs node under a command (see LearnerProgram; the
   * containers lesson: unshare for a PID namespace, taskset for a CPU set).
   * The program listens on verifier.host when the verifier names one (given
   * to it as HOST, and probed there), else it is reached at 127.0.0.1.
   */
  async start(env = {}, { port, prefix } = {}) {
    const lessonEnv = { ...this.lessonEnv, ...env };
    // A prefixed start (the containers lesson's unshare/taskset) never takes a prestarted program.
    let early = prefix ? null : this.takePrestarted(lessonEnv);
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
        // The port the caller chose (run --port) for the first try only.
        const chosen = attempt === 1 && port ? port : await freePort();
        this.program = new LearnerProgram({
          file: this.file,
          port: chosen,
          env: lessonEnv,
          onLine: (stream, line) => this.reporter.programLine(stream, line),
          packages: this.packages,
          prefix,
          host: this.verifier?.host,
          launcher: this.verifier.launcher,
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
    await this.stopOthers(options);
  }

  /**
   * Starts another run of the learner's program beside the running one (a
   * second "machine": another HOST, the same PORT), in its own process group,
   * and waits until it is ready as start() does. No port race retry: the
   * port is the caller's. The teardown stops it with the program; stop it
   * earlier with stopAnother(). Its output goes to the same log, each line
   * led by `label` when given.
   */
  async startAnother(env = {}, { port, host, label } = {}) {
    const program = new LearnerProgram({
      file: this.file,
      port: port ?? (await freePort()),
      env: { ...this.lessonEnv, ...env },
      onLine: (stream, line) => this.reporter.programLine(stream, label ? `${label} ${line}` : line),
      packages: this.packages,
      host,
    });
    this.others.add(program);
    this.log(`$ ${program.commandLine()}`);
    program.start();
    // Readiness judges ctx.program: this one stands in for it, with every
    // other member of the context unchanged.
    const view = Object.create(this, { program: { value: program } });
    await waitUntilReady(view, { timeoutMs: this.readyTimeoutMs });
    return program;
  }

  /** Stops a program startAnother() started; resolves once none of its processes is left. */
  async stopAnother(program, options) {
    this.others.delete(program);
    await program.stop(options);
  }

  /**
   * Starts a program that is not the learner's (a load balancer, a database)
   * in a process group of its own (see HelperProcess); the teardown stops it
   * with the learner's program, whatever the verdict.
   */
  startHelper(options) {
    const helper = new HelperProcess(options);
    this.helpers.add(helper);
    helper.start();
    return helper;
  }

  /** Stops a helper now; resolves once none of its processes is left. */
  async stopHelper(helper, options) {
    this.helpers.delete(helper);
    await helper.stop(options);
  }

  async stopOthers(options) {
    const others = [...this.others, ...this.helpers];
    this.others.clear();
    this.helpers.clear();
    await Promise.all(others.map((p) => p.stop(options)));
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
      packages: this.packages,
      launcher: this.verifier.launcher,
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
    return request(this.port, path, { signal: this.signal, host: this.program?.host ?? undefined, ...options });
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
    return curlFor({ method: 'GET', url: `http://${this.program?.host ?? '127.0.0.1'}:${this.port}${path}`, ...options });
  }

  workers() {
    return this.program?.workers() ?? [];
  }

  /** Continuous fresh-connection load that ends with the step at the latest (see load.js). */
  startLoad(options = {}) {
    return startLoad(this.port, { signal: this.signal, host: this.program?.host ?? undefined, ...options });
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
  poll(fn, { timeoutMs, intervalMs = 20 }) {
    return pollUntil(fn, { timeoutMs, intervalMs, signal: this.signal });
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

/** Figures kept between lessons, in memory only (tests, run, bench). */
export function memoryStore() {
  const values = new Map();
  return { get: (k) => values.get(k), set: (k, v) => values.set(k, v) };
}
