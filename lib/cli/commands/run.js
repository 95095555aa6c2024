// `run`: the learner's program started exactly as the verifier starts it
// (the harness's launch path: same environment, port-race retry, readiness
// and fork watchdog), kept up so they can try it by hand. On a terminal a live panel shows the cluster and has keys for
// traffic and faults; otherwise the cluster's events come as plain lines.
// Ctrl-C, SIGTERM, SIGHUP or q stop every process it started.
import { dirname } from 'node:path';
import { lessonFrom, fileFrom } from '../lesson-arg.js';
import { loadVerifier } from '../../manifest.js';
import { StepFailure, formatFailure } from '../../harness/failure.js';
import { canListen, freePort } from '../../harness/ports.js';
import { launch, lessonEnvOf } from '../../harness/launch.js';
import { describeExit } from '../../harness/program.js';
import { colorEnabled, makeStyle } from '../style.js';
import { onInterrupt } from '../interrupt.js';
import { EXIT, UsageError } from '../errors.js';
import { routesOf, curlLine } from '../live/routes.js';

import { DEFAULT_PORT } from '../../course/port.js';

export const options = { port: { type: 'string', short: 'p' }, dir: { type: 'string' }, plain: { type: 'boolean' } };
export const usage = `Usage: cluster-workshop run [lesson] [file] [--port <n>] [--plain] [--dir <workspace>]

Starts your program as the verifier does (\`node <file>\` in its folder, with
PORT and the lesson's variables such as WORKERS=3), waits until it answers,
prints the URL and curl lines to try, and relays its output under
[your program]. Ctrl-C stops it and every worker.

On a terminal it shows a live view of the cluster: the primary and each
worker (pid, uptime, requests served), restarts, and events (forked,
listening, died). Keys: b a burst of requests, k kill a random worker,
u send SIGUSR2, t send SIGTERM, q quit.

  lesson     number (3) or id (respawn); default: your current lesson
  file       your program; default: the lesson's file in your workspace
  --port     the PORT to give it (default ${DEFAULT_PORT}; a free one if that is taken)
  --plain    plain event lines instead of the live view

Exit code: 0 when you stopped it (q, Ctrl-C, or t/u and it exited), 1 when
your program stopped by itself or never answered, 2 usage error.`;

export async function run(values, [name, file], io) {
  const lesson = lessonFrom(name, { dir: values.dir, env: io.env, cwd: io.cwd });
  const path = fileFrom(lesson, file, { dir: values.dir, env: io.env, cwd: io.cwd, command: 'run', tell: io.out });
  const wanted = parsePort(values.port);
  const verifier = await loadVerifier(lesson);
  const env = lessonEnvOf(verifier);
  const style = makeStyle(colorEnabled(io.stdout, io.env));
  const live = io.interactive() && !values.plain;

  const chosenPort = wanted !== 0 && (await canListen(wanted)) ? wanted : await freePort();
  if (chosenPort !== wanted && wanted !== 0) io.out(style.yellow(`Port ${wanted} is taken (another program listens on it), so PORT=${chosenPort} instead.\n`));

  let panel = null;
  let observer = null;
  const early = [];
  const onLine = (stream, line) => {
    if (panel) return panel.addOutput(stream, line);
    early.push({ stream, line });
    io.out(`${stream === 'stderr' ? style.yellow('[your program]') : style.dim('[your program]')} ${line}\n`);
  };
  const log = (message) => {
    if (observer) return observer.event('action', `you: ${message}`);
    // The launch's start commands, as the learner would type them.
    if (message.startsWith('$ ')) return io.out(style.dim(`$ cd ${dirname(path)} && ${message.slice(2)}\n`));
    io.out(`${style.cyan('[run]')} ${message}\n`);
  };

  const controller = new AbortController();
  let wake;
  const woken = new Promise((resolve) => (wake = resolve));
  io.out(style.bold(`Lesson ${lesson.number} "${lesson.title}": starting your program as the verifier does\n`));
  const stopRequested = (reason) => {
    controller.abort(reason);
    wake({ kind: 'stop', reason });
  };
  // Before the launch: a Ctrl-C that lands the moment the program is spawned
  // must stop it, not kill this process and leave the program (which has a
  // process group of its own) running.
  const release = onInterrupt((signal) => stopRequested(signal));
  const launched = launch({ file: path, verifier, packages: lesson.packages, env, port: chosenPort, onLine, log, signal: controller.signal });
  const { ctx } = launched;
  launched.forkBomb.then((failure) => wake({ kind: 'forkbomb', failure }));
  let sentByUs = null; // the last signal the learner sent to the primary from the panel

  try {
    let program;
    try {
      const interrupted = woken.then((w) => Promise.reject(w));
      interrupted.catch(() => {}); // settles after the race when the program became ready first
      program = await Promise.race([launched.ready, interrupted]);
    } catch (err) {
      if (err?.kind === 'forkbomb') return forkBombed(err.failure, io, style);
      if (controller.signal.aborted) {
        io.out(`Stopped (${controller.signal.reason}) before your program answered.\n`);
        return EXIT.ok;
      }
      if (err instanceof StepFailure) {
        if (err.forkBomb) return forkBombed(err, io, style);
        err.outputLines = undefined; // already relayed above, as it happened
        io.out(`${style.red(formatFailure(err, { commandLine: ctx.program?.commandLine() }))}\n`);
        return EXIT.failed;
      }
      throw err;
    }
    // After a port race the program runs on another port than the one chosen.
    const port = program.port;

    // A lesson may give the program a HOST to listen on (beyond-one-machine: 127.0.0.2).
    const host = program.host ?? '127.0.0.1';
    const url = `http://${host}:${port}/`;
    const tryLines = routesOf(lesson).map((r) => curlLine(port, r, host));
    const { ClusterObserver } = await import('../live/observer.js');
    observer = new ClusterObserver(ctx, { probeEveryMs: live ? 500 : 0 });

    if (live) {
      const { LivePanel } = await import('../live/panel.js');
      panel = new LivePanel({
        observer,
        stdout: io.stdout,
        stdin: process.stdin,
        title: `cluster-workshop run · lesson ${lesson.number} ${lesson.id} · ${url}`,
        tryLines,
        style,
        onAction: (action) => {
          if (action === 'quit') return stopRequested('quit');
          if (action === 'burst') return void observer.burst();
          if (action === 'kill') return void observer.killRandomWorker('SIGKILL');
          sentByUs = action === 'usr2' ? 'SIGUSR2' : 'SIGTERM';
          observer.signalPrimary(sentByUs);
        },
      });
      for (const { stream, line } of early) panel.addOutput(stream, line);
      panel.start();
    } else {
      io.out(`${style.green(`Your program answers on ${url}`)}  (primary pid ${program.pid})\n`);
      io.out('Try, in another terminal:\n');
      for (const l of tryLines) io.out(`  ${l}\n`);
      io.out(`  pgrep -P ${program.pid}        # its workers\n`);
      io.out(style.dim('Cluster events follow as [cluster] lines. Ctrl-C stops everything.\n'));
      observer.on('event', (e) => io.out(`${e.kind === 'died' || e.kind === 'exit' ? style.red('[cluster]') : style.cyan('[cluster]')} ${e.text}\n`));
    }
    observer.start();

    const outcome = await Promise.race([program.exitPromise.then(() => ({ kind: 'exited' })), woken]);
    if (outcome.kind === 'exited') observer.primaryExited();
    observer.stop();
    panel?.stop();
    if (live) printRecap(observer, io, style);

    if (outcome.kind === 'forkbomb') return forkBombed(outcome.failure, io, style);
    if (outcome.kind === 'exited') return exitedByItself(program, sentByUs, io, style);
    io.out(`Stopping your program (${outcome.reason})...\n`);
    return EXIT.ok;
  } finally {
    observer?.stop();
    panel?.stop();
    release();
    const last = launched.program;
    await launched.stop();
    const left = last ? last.processes() : [];
    io.out(left.length ? style.red(`${left.length} process(es) could not be stopped: ${left.map((p) => p.pid).join(', ')}\n`) : style.dim('Stopped: no process of your program is left.\n'));
  }
}

function parsePort(text) {
  if (text === undefined) return DEFAULT_PORT;
  const port = Number(text);
  if (!Number.isInteger(port) || port < 0 || port > 65535) throw new UsageError(`--port takes a port number (1-65535, or 0 for any free port), not "${text}".`);
  return port;
}

function exitedByItself(program, sentByUs, io, style) {
  const how = describeExit(program.exit);
  if (sentByUs) {
    io.out(`Your program ${how} after the ${sentByUs} you sent.\n`);
    printTail(program, io, style, 8);
    return EXIT.ok; // you stopped it, with a signal of your choice; the line above says how it took it
  }
  io.out(style.red(`Your program ${how} by itself.\n`));
  printTail(program, io, style, 15);
  return EXIT.failed;
}

// The verifier's own words (the same watchdog and limit as verify).
function forkBombed(failure, io, style) {
  io.out(`${style.red(formatFailure(failure))}\n`);
  return EXIT.failed;
}

function printTail(program, io, style, n) {
  const lines = program.telltaleLines(n);
  if (!lines.length) return io.out(style.dim('(it printed nothing)\n'));
  io.out("Its last output:\n");
  for (const l of lines) io.out(`  | ${l}\n`);
}

// The panel lived on the alternate screen; leave its story in the scrollback.
function printRecap(observer, io, style) {
  io.out(style.bold(`Cluster: ${observer.forks} workers forked, ${observer.deaths} died, ${observer.restarts} restarts.\n`));
  for (const e of observer.events.slice(-10)) io.out(`  ${e.text}\n`);
}
