// Ready means: answers GET / over HTTP. Log lines are never trusted (express 5
// prints its listen callback even when listen failed with EADDRINUSE). For a
// cluster, ready also means every worker that exists has answered once, so
// the steps do not race workers that are still starting.
import { request } from './http.js';
import { StepFailure } from './failure.js';
import { listeningSockets, takenByOthers } from './sockets.js';
import { cpuSeconds } from './processes.js';
import { describeExit } from './program.js';
import { sleepFor } from './wait.js';
import { startFailureAdvice } from './start-failure-advice.js';

const PROBE_TIMEOUT_MS = 1000;
const SETTLE_MS = 3000;
// Workers that all died and were not replaced for this long will not come back.
const ALL_DEAD_MS = 2000;
// A program that used at least this share of the wall time in CPU while never
// answering, and still uses that share at the deadline (over the last
// IDLE_WINDOW_MS), is busy (a loop), not waiting; an idle one uses a few
// percent. Both, because on a loaded machine three workers loading express
// used 1.2 s of the 4.3 s before the deadline and then sat idle, never
// listening: "busy in a loop" named a cause that program does not have.
const BUSY_SHARE = 0.25;
// A program that listens on another port than PORT is told so as soon as it
// settles: it has listened there for this long, nothing listens on PORT, and
// its processes have been idle (it is waiting, not still starting up) over
// the last IDLE_WINDOW_MS. A program that opens a port of its own first and
// PORT a moment later is still starting, so it uses CPU, and is not judged.
const WRONG_PORT_GRACE_MS = 1000;
const IDLE_WINDOW_MS = 500;
const IDLE_CPU_SECONDS = 0.03;
const SOCKET_LOOK_EVERY_MS = 200;

/**
 * Another program took PORT between the verifier choosing it and the
 * learner's listen: nothing the learner did. ctx.start() retries on another port.
 */
export class PortTaken extends StepFailure {
  constructor(port) {
    super(`Port ${port} was taken by another program before yours listened on it.`, {
      expected: `your program listening on port ${port}`,
      actual: 'a process that is not part of your program listens on it',
      explanation: 'Not your program\'s fault: something else on this machine took the port. Stop the other server or choose another port.',
      reproduce: `ss -ltnp 'sport = :${port}'   # who listens on it`,
    });
    this.name = 'PortTaken';
    this.port = port;
  }
}

export async function waitUntilReady(ctx, { timeoutMs = 15000 } = {}) {
  const program = ctx.program;
  const expected = ctx.expectedWorkers;
  const started = performance.now();
  const seenWorkers = new Set();
  let first = null;
  let allDeadSince = null;
  let hung = false;
  const wrongPort = new WrongPortWatch(program.port);
  let lookedAt = 0;

  while (!first) {
    ctx.signal.throwIfAborted();
    if (program.exited) throw portTakenIn(program) ?? exitedEarly(program, seenWorkers.size);
    const alive = program.workers();
    alive.forEach((pid) => seenWorkers.add(pid));
    const died = seenWorkers.size - alive.length;
    if (expected > 0 && died >= Math.max(4, expected * 2)) throw workersKeepDying(program, died);
    // Workers that died and were not replaced (no 'exit' handler yet) leave a
    // primary that will never answer: say so now rather than at the deadline.
    // Workers that die within a few ms of their fork can come and go between
    // two scans: for a cluster lesson, an error in the output of a primary
    // left with no worker tells the same.
    const workersGone = alive.length === 0 && (seenWorkers.size > 0 || (expected > 0 && program.tail.some((l) => /Error/.test(l))));
    allDeadSince = workersGone ? (allDeadSince ?? performance.now()) : null;
    if (allDeadSince !== null && performance.now() - allDeadSince > ALL_DEAD_MS) throw workersAllDied(program, seenWorkers.size);

    // After a probe that hung (accepted, never answered: some connections of
    // a program get lost while others are served), probe several at once so
    // that a program answering some requests is not declared dead.
    const r = await firstAnswer(program, hung ? 3 : 1, ctx.signal);
    hung = r.code === 'TIMEOUT';
    // An answer from a stranger that holds the port is no answer from the program.
    const taken = portTakenIn(program);
    if (taken) throw taken;
    if (r.ok) {
      first = r;
      break;
    }
    if (performance.now() - started > timeoutMs) throw portTakenIn(program) ?? neverAnswered(program, timeoutMs, seenWorkers.size, ctx.verifier, wrongPort.busyNow());
    if (performance.now() - lookedAt >= SOCKET_LOOK_EVERY_MS) {
      lookedAt = performance.now();
      const elsewhere = wrongPort.observe(sampleListening(program));
      if (elsewhere) throw listensElsewhere(program, elsewhere);
    }
    await sleepFor(50, ctx.signal);
  }
  ctx.log(`ready: GET / answered after ${Math.round(performance.now() - started)} ms`);

  if (expected > 0) {
    // Round-robin hands each new connection to the next listening worker, so a
    // few probes reach every worker that listens.
    // Answers carry the pid each process sees (in a PID namespace, not this machine's): hostPidOf.
    const answered = new Set(first.pid !== undefined ? [program.hostPidOf(first.pid)] : []);
    // Each worker that answers for the first time extends the wait (within
    // the readiness deadline): on a loaded machine workers come up seconds
    // apart, and one still starting is not one that never listens.
    let settleUntil = performance.now() + SETTLE_MS;
    const readyDeadline = started + timeoutMs;
    const probeAddresses = ctx.verifier?.probeAddresses ?? [undefined];
    let probes = 0;
    while (performance.now() < settleUntil) {
      const workers = program.workers();
      if (workers.length >= expected && workers.every((pid) => answered.has(pid))) break;
      if (program.exited) throw exitedEarly(program);
      // A program that routes by client address (sticky sessions) reaches
      // every worker only from several addresses: verifier.probeAddresses.
      const localAddress = probeAddresses[probes++ % probeAddresses.length];
      const r = await request(program.port, '/', { timeoutMs: PROBE_TIMEOUT_MS, signal: ctx.signal, localAddress, host: program.host ?? undefined });
      const answeredBy = program.hostPidOf(r.pid);
      if (answeredBy !== undefined && !answered.has(answeredBy)) {
        answered.add(answeredBy);
        settleUntil = Math.max(settleUntil, Math.min(performance.now() + SETTLE_MS, readyDeadline));
      }
      if (r.pid === undefined) await sleepFor(20, ctx.signal);
    }
  }
  return first;
}

/** What the program's processes listen on now and the CPU time they used so far. */
function sampleListening(program) {
  const pids = program.processes({ includeMarked: false }).map((p) => p.pid);
  return {
    now: performance.now(),
    ports: [...new Set(listeningSockets(pids).map((s) => s.port))],
    cpuSeconds: pids.reduce((sum, pid) => sum + cpuSeconds(pid), 0),
  };
}

/**
 * Judges, from samples of the ports a program listens on and its CPU time,
 * when it has settled listening on other ports than PORT (see
 * WRONG_PORT_GRACE_MS). observe() returns those ports then, else null.
 */
export class WrongPortWatch {
  constructor(port, { graceMs = WRONG_PORT_GRACE_MS, idleWindowMs = IDLE_WINDOW_MS, idleCpuSeconds = IDLE_CPU_SECONDS } = {}) {
    this.port = port;
    this.graceMs = graceMs;
    this.idleWindowMs = idleWindowMs;
    this.idleCpuSeconds = idleCpuSeconds;
    this.since = null; // when it was first seen listening elsewhere only
    this.samples = [];
  }

  /** @param {{ now: number, ports: number[], cpuSeconds: number }} sample */
  observe({ now, ports, cpuSeconds }) {
    this.samples.push({ now, cpuSeconds });
    this.last = { now, cpuSeconds };
    while (this.samples.length > 2 && this.samples[1].now <= now - this.idleWindowMs) this.samples.shift();
    const elsewhere = ports.filter((p) => p !== this.port).sort((a, b) => a - b);
    if (ports.includes(this.port) || elsewhere.length === 0) {
      this.since = null;
      return null;
    }
    this.since ??= now;
    if (now - this.since < this.graceMs) return null;
    const windowStart = this.samples[0];
    if (now - windowStart.now < this.idleWindowMs) return null;
    const busy = cpuSeconds - windowStart.cpuSeconds >= this.idleCpuSeconds;
    return busy ? null : elsewhere;
  }

  /**
   * Whether the program still used at least BUSY_SHARE of the time in CPU
   * over the last samples (IDLE_WINDOW_MS or more); null while there are too few.
   */
  busyNow() {
    const first = this.samples[0];
    if (!first || !this.last || this.last.now - first.now < this.idleWindowMs) return null;
    return this.last.cpuSeconds - first.cpuSeconds >= BUSY_SHARE * ((this.last.now - first.now) / 1000);
  }
}

function listensElsewhere(program, ports) {
  const list = ports.join(', ');
  return new StepFailure(`Your program listens on port ${list}, not on the PORT it was given (${program.port}).`, {
    expected: `a server listening on PORT=${program.port}`,
    actual: `it listens on port ${list} and nothing listens on ${program.port}`,
    explanation: `It listens on port ${list} instead. Listen on the port the verifier gives: app.listen(process.env.PORT): a port written in the code may be taken wherever the program runs, so the verifier chooses a free one.`,
    reproduce: [`${program.commandLine()}   # then: ss -ltnp | grep node`],
    outputLines: program.telltaleLines(10),
  });
}

/** n probes of GET / at once: the first answer, else the last failure. */
async function firstAnswer(program, n, signal) {
  const probes = Array.from({ length: n }, () => request(program.port, '/', { timeoutMs: PROBE_TIMEOUT_MS, signal, host: program.host ?? undefined }));
  const answered = await Promise.any(probes.map((p) => p.then((r) => (r.ok ? r : Promise.reject(r))))).catch(() => null);
  return answered ?? (await probes[probes.length - 1]);
}

// A fix that Node's own lines name exactly (start-failure-advice.js), said after the explanation.
function withAdvice(explanation, program) {
  const advice = startFailureAdvice(program.tail);
  return advice ? `${explanation} ${advice}` : explanation;
}

function exitedEarly(program, workersSeen = 0) {
  const { code, signal } = program.exit;
  const how = describeExit(program.exit);
  const quiet = program.tail.length === 0;
  const explanation = withAdvice(explainExit({ code, signal, workersSeen, errorInOutput: program.tail.some((l) => /Error/.test(l)) }), program);
  return new StepFailure(`Your program ${how} before it answered GET / on port ${program.port}.`, {
    expected: 'a server that keeps running and answers on PORT',
    actual: `${how}${quiet ? ' without printing anything' : ''}`,
    explanation,
    reproduce: [`cd ${JSON.stringify(program.file.replace(/\/[^/]*$/, ''))}`, program.commandLine()],
    outputLines: program.telltaleLines(),
  });
}

/**
 * Why a program exited before it answered, from its exit and output. Pure.
 * Workers can die before any look at the process table sees them; an error
 * in the output of a primary that exited 0 came from one of them.
 */
export function explainExit({ code, signal, workersSeen = 0, errorInOutput = false }) {
  if (code === 0 && !signal && (workersSeen > 0 || errorInOutput)) {
    return `Its ${workersSeen > 0 ? `${workersSeen} ` : ''}worker(s) exited first, and a primary with no worker left has nothing to keep it running. The lines below show why the workers stopped.`;
  }
  if (code === 0 && !signal) {
    return 'Exit code 0 means it ran to the end: nothing kept it running. Does it call app.listen(process.env.PORT) (in the workers, from lesson 2 on)?';
  }
  return 'It stopped on an error. The lines below are where it happened.';
}

/**
 * A PortTaken when a process that is not the program's listens on PORT (its
 * own listen then fails with EADDRINUSE, or never happens). A program whose
 * own processes compete for PORT is its own mistake, not a taken port.
 */
function portTakenIn(program) {
  const ours = program.processes({ includeMarked: false }).map((p) => p.pid);
  return takenByOthers(program.port, ours, { host: program.host }) ? new PortTaken(program.port) : null;
}

function workersAllDied(program, died) {
  // `died` counts the workers a scan of the process table saw: one that dies
  // within a few ms of its fork can come and go between two scans.
  const wanted = program.lessonEnv?.WORKERS;
  return new StepFailure('Every worker exited during start-up, and none replaced them.', {
    expected: 'workers that start and listen on PORT',
    actual: `no worker left (${died ? `${died} seen exiting` : 'they died before a scan of the processes saw them'}${wanted ? `, WORKERS=${wanted}` : ''}); the primary (pid ${program.pid}) runs alone and listens on nothing`,
    explanation: withAdvice('The workers stopped before they answered a request: the lines below show why (an error while starting, or a worker that runs to its end without calling listen).', program),
    reproduce: program.commandLine(),
    outputLines: program.telltaleLines(),
  });
}

function workersKeepDying(program, died) {
  return new StepFailure(`Your workers keep dying at start-up (${died} died before any answered).`, {
    expected: 'workers that start and listen on PORT',
    actual: `${died} workers exited during start-up`,
    explanation: withAdvice('A worker that throws while starting is replaced and throws again. The error below is what kills them.', program),
    reproduce: program.commandLine(),
    outputLines: program.telltaleLines(),
  });
}

function neverAnswered(program, timeoutMs, workersSeen = 0, verifier, busyNow = null) {
  const procs = program.processes();
  const sockets = listeningSockets(procs.map((p) => p.pid));
  const host = program.host ?? '127.0.0.1';
  const explanation = explainSilence({
    port: program.port,
    host: program.host ?? undefined,
    // Given a HOST, only a socket on it (or on every address) is where the verifier connects.
    onPort: sockets.filter((s) => s.port === program.port).map((s) => (program.host ? { ...s, reachable: listensOn(s.address, program.host) } : s)),
    elsewhere: [...new Set(sockets.filter((s) => s.port !== program.port).map((s) => s.port))].sort((a, b) => a - b),
    addrInUse: program.tail.some((l) => l.includes('EADDRINUSE')),
    cpuSeconds: procs.reduce((sum, p) => sum + cpuSeconds(p.pid), 0),
    ranSeconds: (performance.now() - program.startedAt) / 1000,
    busyNow,
    workersSeen,
    workersNow: program.workers().length,
    acceptedButSilent: verifier?.acceptedButSilent,
  });
  return new StepFailure(`Nothing answered GET http://${host}:${program.port}/ within ${timeoutMs / 1000} s.`, {
    expected: `an HTTP answer on ${program.host ? `HOST=${host} ` : ''}PORT=${program.port}`,
    actual: 'every request was refused or timed out',
    explanation,
    reproduce: [`curl -s 'http://${host}:${program.port}/'`],
    outputLines: program.telltaleLines(10),
  });
}

/**
 * Why a program never answered, from what can be seen of it (first match
 * wins): where it listens, EADDRINUSE in its output, its CPU use (over the
 * whole run, and `busyNow`: still at the deadline; null when not sampled),
 * its workers.
 * Pure: the evidence comes in, so each rule is tested on its own.
 */
export function explainSilence({ port, host, onPort = [], elsewhere = [], addrInUse = false, cpuSeconds = 0, ranSeconds = 1, busyNow = null, workersSeen = 0, workersNow = 0, acceptedButSilent }) {
  if (onPort.length && !onPort.some((s) => s.reachable)) {
    const where = [...new Set(onPort.map((s) => s.address))].join(', ');
    if (host) {
      return `It listens on PORT=${port}, but only on the address ${where}; the verifier connects to HOST=${host}, the address it gave. Listen there: app.listen(process.env.PORT, process.env.HOST).`;
    }
    return `It listens on PORT=${port}, but only on the address ${where}; the verifier (like curl http://127.0.0.1:${port}/) connects to 127.0.0.1. Leave the host out, app.listen(process.env.PORT), to listen on every address.`;
  }
  if (!onPort.length && elsewhere.length) {
    return `It listens on port ${elsewhere.join(', ')} instead. Listen on the port the verifier gives: app.listen(process.env.PORT).`;
  }
  if (addrInUse) return 'Its output shows EADDRINUSE: the port was taken. Listen on process.env.PORT, which the verifier chose free.';
  if (cpuSeconds >= Math.max(1, BUSY_SHARE * ranSeconds) && busyNow !== false) {
    return `It used the CPU for ${cpuSeconds.toFixed(1)} s of the ${ranSeconds.toFixed(1)} s it ran: it is busy, most likely in a synchronous loop at start-up that does not end, so it never gets to listen or to answer. Move long work out of start-up, or make it end.`;
  }
  if (onPort.length) {
    return acceptedButSilent ?? `It accepts connections on PORT=${port} but never answered GET /. Does the route for GET / send a response, res.json({ pid: process.pid })?`;
  }
  if (workersSeen > 0 && workersNow === 0) return 'Its workers exited and the primary listens on nothing. The lines below show why the workers stopped.';
  return `It is running but listens on no port. Does it call app.listen(process.env.PORT)${workersSeen > 0 ? ' in every worker' : ''}?`;
}

/** Whether a socket listening on `address` takes connections to `host` (the same address, or every address). */
function listensOn(address, host) {
  return address === host || address === `::ffff:${host}` || address === '0.0.0.0' || address === '::';
}
