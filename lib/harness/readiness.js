// Ready means: answers GET / over HTTP. Log lines are never trusted (express 5
// prints its listen callback even when listen failed with EADDRINUSE). For a
// cluster, ready also means every worker that exists has answered once, so
// the steps do not race workers that are still starting.
import { request } from './http.js';
import { StepFailure } from './failure.js';
import { listeningSockets, takenByOthers } from './sockets.js';
import { cpuSeconds } from './processes.js';
import { sleepFor } from './context.js';

const PROBE_TIMEOUT_MS = 1000;
const SETTLE_MS = 3000;
// Workers that all died and were not replaced for this long will not come back.
const ALL_DEAD_MS = 2000;
// A program that used at least this share of the wall time in CPU while never
// answering is busy (a loop), not waiting; an idle one uses a few percent.
const BUSY_SHARE = 0.25;

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
    const r = await firstAnswer(program.port, hung ? 3 : 1, ctx.signal);
    hung = r.code === 'TIMEOUT';
    // An answer from a stranger that holds the port is no answer from the program.
    const taken = portTakenIn(program);
    if (taken) throw taken;
    if (r.ok) {
      first = r;
      break;
    }
    if (performance.now() - started > timeoutMs) throw portTakenIn(program) ?? neverAnswered(program, timeoutMs, seenWorkers.size, ctx.verifier);
    await sleepFor(50, ctx.signal);
  }
  ctx.log(`ready: GET / answered after ${Math.round(performance.now() - started)} ms`);

  if (expected > 0) {
    // Round-robin hands each new connection to the next listening worker, so a
    // few probes reach every worker that listens.
    const answered = new Set(first.pid !== undefined ? [first.pid] : []);
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
      const r = await request(program.port, '/', { timeoutMs: PROBE_TIMEOUT_MS, signal: ctx.signal, localAddress });
      if (r.pid !== undefined && !answered.has(r.pid)) {
        answered.add(r.pid);
        settleUntil = Math.max(settleUntil, Math.min(performance.now() + SETTLE_MS, readyDeadline));
      }
      if (r.pid === undefined) await sleepFor(20, ctx.signal);
    }
  }
  return first;
}

/** n probes of GET / at once: the first answer, else the last failure. */
async function firstAnswer(port, n, signal) {
  const probes = Array.from({ length: n }, () => request(port, '/', { timeoutMs: PROBE_TIMEOUT_MS, signal }));
  const answered = await Promise.any(probes.map((p) => p.then((r) => (r.ok ? r : Promise.reject(r))))).catch(() => null);
  return answered ?? (await probes[probes.length - 1]);
}

function exitedEarly(program, workersSeen = 0) {
  const { code, signal } = program.exit;
  const how = signal ? `was killed by ${signal}` : `exited with code ${code}`;
  const quiet = program.tail.length === 0;
  let explanation;
  // Workers can die before any look at the process table sees them; an error
  // in the output of a primary that exited 0 came from one of them.
  const childFailed = workersSeen > 0 || program.tail.some((l) => /Error/.test(l));
  if (code === 0 && !signal && childFailed) {
    explanation = `Its ${workersSeen > 0 ? `${workersSeen} ` : ''}worker(s) exited first, and a primary with no worker left has nothing to keep it running. The lines below show why the workers stopped.`;
  } else if (code === 0 && !signal) {
    explanation = 'Exit code 0 means it ran to the end: nothing kept it running. Does it call app.listen(process.env.PORT) (in the workers, from lesson 2 on)?';
  } else {
    explanation = 'It stopped on an error. The lines below are where it happened.';
  }
  return new StepFailure(`Your program ${how} before it answered GET / on port ${program.port}.`, {
    expected: 'a server that keeps running and answers on PORT',
    actual: `${how}${quiet ? ' without printing anything' : ''}`,
    explanation,
    reproduce: [`cd ${JSON.stringify(program.file.replace(/\/[^/]*$/, ''))}`, program.commandLine()],
    outputLines: program.telltaleLines(),
  });
}

/**
 * A PortTaken when a process that is not the program's listens on PORT (its
 * own listen then fails with EADDRINUSE, or never happens). A program whose
 * own processes compete for PORT is its own mistake, not a taken port.
 */
function portTakenIn(program) {
  const ours = program.processes({ includeMarked: false }).map((p) => p.pid);
  return takenByOthers(program.port, ours) ? new PortTaken(program.port) : null;
}

function workersAllDied(program, died) {
  // `died` counts the workers a scan of the process table saw: one that dies
  // within a few ms of its fork can come and go between two scans.
  const wanted = program.lessonEnv?.WORKERS;
  return new StepFailure('Every worker exited during start-up, and none replaced them.', {
    expected: 'workers that start and listen on PORT',
    actual: `no worker left (${died ? `${died} seen exiting` : 'they died before a scan of the processes saw them'}${wanted ? `, WORKERS=${wanted}` : ''}); the primary (pid ${program.pid}) runs alone and listens on nothing`,
    explanation: 'The workers stopped before they answered a request: the lines below show why (an error while starting, or a worker that runs to its end without calling listen).',
    reproduce: program.commandLine(),
    outputLines: program.telltaleLines(),
  });
}

function workersKeepDying(program, died) {
  return new StepFailure(`Your workers keep dying at start-up (${died} died before any answered).`, {
    expected: 'workers that start and listen on PORT',
    actual: `${died} workers exited during start-up`,
    explanation: 'A worker that throws while starting is replaced and throws again. The error below is what kills them.',
    reproduce: program.commandLine(),
    outputLines: program.telltaleLines(),
  });
}

function neverAnswered(program, timeoutMs, workersSeen = 0, verifier) {
  const procs = program.processes();
  const sockets = listeningSockets(procs.map((p) => p.pid));
  const onPort = sockets.filter((s) => s.port === program.port);
  const elsewhere = [...new Set(sockets.filter((s) => s.port !== program.port).map((s) => s.port))].sort((a, b) => a - b);
  const ranSeconds = (performance.now() - program.startedAt) / 1000;
  const cpu = procs.reduce((sum, p) => sum + cpuSeconds(p.pid), 0);
  let explanation;
  if (onPort.length && !onPort.some((s) => s.reachable)) {
    const where = [...new Set(onPort.map((s) => s.address))].join(', ');
    explanation = `It listens on PORT=${program.port}, but only on the address ${where}; the verifier (like curl http://127.0.0.1:${program.port}/) connects to 127.0.0.1. Leave the host out, app.listen(process.env.PORT), to listen on every address.`;
  } else if (!onPort.length && elsewhere.length) {
    explanation = `It listens on port ${elsewhere.join(', ')} instead. Listen on the port the verifier gives: app.listen(process.env.PORT).`;
  } else if (program.tail.some((l) => l.includes('EADDRINUSE'))) {
    explanation = 'Its output shows EADDRINUSE: the port was taken. Listen on process.env.PORT, which the verifier chose free.';
  } else if (cpu >= Math.max(1, BUSY_SHARE * ranSeconds)) {
    explanation = `It used the CPU for ${cpu.toFixed(1)} s of the ${ranSeconds.toFixed(1)} s it ran: it is busy, most likely in a synchronous loop at start-up that does not end, so it never gets to listen or to answer. Move long work out of start-up, or make it end.`;
  } else if (onPort.length) {
    explanation =
      verifier?.acceptedButSilent ??
      `It accepts connections on PORT=${program.port} but never answered GET /. Does the route for GET / send a response, res.json({ pid: process.pid })?`;
  } else if (workersSeen > 0 && program.workers().length === 0) {
    explanation = 'Its workers exited and the primary listens on nothing. The lines below show why the workers stopped.';
  } else {
    explanation = `It is running but listens on no port. Does it call app.listen(process.env.PORT)${workersSeen > 0 ? ' in every worker' : ''}?`;
  }
  return new StepFailure(`Nothing answered GET http://127.0.0.1:${program.port}/ within ${timeoutMs / 1000} s.`, {
    expected: `an HTTP answer on PORT=${program.port}`,
    actual: 'every request was refused or timed out',
    explanation,
    reproduce: [`curl -s http://127.0.0.1:${program.port}/`],
    outputLines: program.telltaleLines(10),
  });
}
