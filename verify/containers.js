// The containers lesson (containers): the graceful-shutdown program as a
// container runs it. Its Dockerfile is checked first, statically: an
// exec-form CMD/ENTRYPOINT that runs node (or tini), not npm start nor a
// shell; a non-root USER; NODE_ENV=production. Then, on Linux, the program
// runs as PID 1 of its own PID namespace (unshare, no root needed where user
// namespaces are enabled), as `docker run` starts it: SIGTERM to PID 1 (what
// `docker stop` sends) drains keep-alive clients and a request in flight and
// exits 0 within 5 s; started with WORKERS unset on one CPU (taskset), it
// forks one worker; a worker killed there is reaped, no zombie is left.
// Where unshare or taskset cannot run, those steps say so and are skipped.
import { existsSync, readFileSync, readdirSync } from 'node:fs';
import { basename, dirname, join } from 'node:path';
import { cpus } from 'node:os';
import { countWorkers } from './shared/workers.js';
import { startFreshKeepAliveInFlight } from './shared/fresh-inflight.js';
import { watchShutdown, exitWithinDeadline, EXIT_DEADLINE_MS } from './shared/shutdown.js';
import { classifyKeepAlive, lingeringWorkers, lingeringFailure, describeKeepAliveFailures, summarizeKeepAlive, DRAIN_MS } from './shared/drain.js';
import { watchStopsAccepting, stillAcceptingFailure } from './shared/stops-accepting.js';
import { readDockerfile, execForm, lastOf, envOf } from './shared/dockerfile.js';
import { startKeepAliveClients } from '../lib/harness/keepalive.js';
import { isolationSupport, isolationPrefix, allowedCpus } from '../lib/harness/isolation.js';
import { isReaped, namespacePidOf } from '../lib/harness/processes.js';

const WORKERS = 2;
// Long enough that a worker draining without closing its server keeps the
// port open well past STOP_ACCEPTING_MS, short enough to exit within 5 s.
const SLOW_MS = 2000;
const SLOW = `/slow?ms=${SLOW_MS}`;
// A program that calls worker.disconnect() refuses new connections within
// tens of milliseconds of the signal (63 ms at worst, seen under 2 CPU hogs).
const STOP_ACCEPTING_MS = 1000;
const KEEP_ALIVE_CLIENTS = 3;
const RUNNERS = new Set(['node', 'nodejs', 'tini', 'tini-static', 'dumb-init']);
const INITS = new Set(['tini', 'tini-static', 'dumb-init']);
// The kernel rule, in the words every message that needs it uses.
const PID1_RULE =
  'The kernel does not apply the default action of a signal to PID 1 of a PID namespace (the init of a container): a signal PID 1 has no handler for is dropped. Outside a container SIGTERM ends a Node.js process with no handler; as PID 1 nothing happens, docker stop waits its 10 s and sends SIGKILL (exit code 137), and every request in flight is cut.';

function dockerfileOf(ctx) {
  const file = join(dirname(ctx.file), 'Dockerfile');
  if (!existsSync(file)) {
    ctx.fail(`There is no Dockerfile beside ${basename(ctx.file)}.`, {
      expected: `${file}: the image that runs your program`,
      actual: `no file named Dockerfile in ${dirname(ctx.file)}`,
      hint: 'start from the lesson\'s starter Dockerfile (the start command of the workshop copies it) and follow its TODOs.',
    });
  }
  return { file, dockerfile: readDockerfile(file) };
}

const where = (file, x) => `${basename(file)}, line ${x.line}: ${x.name} ${x.args}`;

const dockerfileCmd = {
  id: 'dockerfile-cmd',
  title: 'the Dockerfile starts node in exec form (CMD ["node", "server.js"]), not npm start nor a shell',
  async run(ctx) {
    const { file, dockerfile } = dockerfileOf(ctx);
    const entry = lastOf(dockerfile, 'ENTRYPOINT');
    const cmd = lastOf(dockerfile, 'CMD');
    if (!entry && !cmd) {
      ctx.fail('The Dockerfile has no CMD (nor ENTRYPOINT): the image would run whatever its base image runs.', {
        expected: 'CMD ["node", "server.js"]',
        actual: 'no CMD or ENTRYPOINT after the last FROM',
        hint: 'end the Dockerfile with CMD ["node", "server.js"].',
      });
    }
    for (const x of [entry, cmd].filter(Boolean)) {
      const argv = execForm(x.args);
      const npm = /(^|[\s"/[])(npm|yarn|pnpm)("|\s|$)/.test(x.args);
      if (npm) {
        ctx.fail(`The Dockerfile starts the program through npm: ${x.name} ${x.args}.`, {
          expected: 'CMD ["node", "server.js"]: node itself is the container\'s main process (PID 1)',
          actual: where(file, x),
          explanation:
            'With npm start, npm is PID 1 and node runs under it, through a shell (sh -c). docker stop sends SIGTERM to npm: whether node gets it depends on the npm version and the shell (npm 6 and older never passed it on; then docker stop waits 10 s and SIGKILLs, exit code 137, cutting every request in flight), and npm reaps no orphans. Your shutdown is no longer in your program\'s hands; the Node.js Docker best practices say to run node directly.',
          hint: 'CMD ["node", "server.js"]: node directly, in the exec form (a JSON array).',
        });
      }
      if (!argv) {
        ctx.fail(`The Dockerfile's ${x.name} is in the shell form: ${x.name} ${x.args}.`, {
          expected: `${x.name} ["node", "server.js"] (the exec form: a JSON array)`,
          actual: where(file, x),
          explanation:
            `The shell form runs /bin/sh -c "${x.args}": sh is PID 1, node its child. docker stop sends SIGTERM to sh, which does not forward it, so your drain never starts and SIGKILL comes 10 s later (exit code 137).`,
          hint: `write it as a JSON array: ${x.name} ["node", "server.js"].`,
        });
      }
    }
    // What PID 1 runs: the ENTRYPOINT's first word, else the CMD's.
    const argv = execForm((entry ?? cmd).args);
    const runner = basename(argv[0] ?? '');
    if (!RUNNERS.has(runner)) {
      ctx.fail(`The Dockerfile's ${(entry ?? cmd).name} runs ${argv[0] ?? 'nothing'}, not node.`, {
        expected: 'CMD ["node", "server.js"] (or ENTRYPOINT ["tini", "--"] then CMD ["node", "server.js"])',
        actual: where(file, entry ?? cmd),
        explanation: 'Whatever runs as PID 1 receives docker stop\'s SIGTERM; a wrapper that does not forward it keeps your drain from ever starting.',
        hint: 'CMD ["node", "server.js"].',
      });
    }
    const reaper = INITS.has(runner) ? `${runner} as PID 1 reaps zombies and forwards signals` : /--init\b/.test(dockerfile.text) ? 'the Dockerfile says to run it with --init' : 'node is PID 1 (run it with docker run --init, or tini, if your workers start processes of their own)';
    ctx.log(`${where(file, entry ?? cmd)}: exec form, runs ${runner}; ${reaper}`);
  },
};

const dockerfileUser = {
  id: 'dockerfile-user',
  title: 'the Dockerfile runs the program as a user that is not root (USER)',
  async run(ctx) {
    const { file, dockerfile } = dockerfileOf(ctx);
    const user = lastOf(dockerfile, 'USER');
    if (!user) {
      ctx.fail('The Dockerfile sets no USER: the program runs as root in the container.', {
        expected: 'USER node (the official node images have that user) or another user that is not root',
        actual: 'no USER after the last FROM: root',
        explanation: 'A process running as root in a container is root on the files it can reach and is one kernel bug away from root on the host. Your server needs no privilege: port 3000 is above 1024.',
        hint: 'USER node, before the CMD (after COPY --chown=node:node . . so it can read its files).',
      });
    }
    const name = user.args.split(':')[0].trim();
    if (name === 'root' || name === '0') {
      ctx.fail(`The Dockerfile's USER is root: ${user.args}.`, {
        expected: 'a user that is not root (USER node)',
        actual: where(file, user),
        explanation: 'USER root (or 0) is what the image does without a USER: the program runs with every privilege in the container.',
        hint: 'USER node.',
      });
    }
    ctx.log(`${where(file, user)}`);
  },
};

const dockerfileEnv = {
  id: 'dockerfile-env',
  title: 'the Dockerfile sets NODE_ENV=production',
  async run(ctx) {
    const { file, dockerfile } = dockerfileOf(ctx);
    const v = envOf(dockerfile).get('NODE_ENV');
    if (v?.value !== 'production') {
      ctx.fail(v ? `The Dockerfile sets NODE_ENV=${v.value}, not production.` : 'The Dockerfile does not set NODE_ENV=production.', {
        expected: 'ENV NODE_ENV=production',
        actual: v ? `${basename(file)}, line ${v.line}: NODE_ENV=${v.value}` : 'no ENV NODE_ENV after the last FROM',
        explanation: 'Express (and many libraries) run their development mode without it: stack traces in error pages, templates recompiled on every request. npm ci --omit=dev is the other half: no dev dependencies in the image.',
        hint: 'ENV NODE_ENV=production, near the top of the final stage.',
      });
    }
    ctx.log(`${basename(file)}, line ${v.line}: NODE_ENV=production`);
  },
};

/** Skips the step (it passes, saying why) when this machine cannot make a PID namespace. */
function pid1Unsupported(ctx) {
  const { pidNamespace } = isolationSupport();
  if (pidNamespace.ok) return false;
  ctx.log(`skipped: ${pidNamespace.reason}. This step runs where unprivileged user namespaces are enabled (most Linux); the workshop's doctor command says why not here.`);
  ctx.attach('skipped', pidNamespace.reason);
  return true;
}

const pid1Sigterm = {
  id: 'pid1-sigterm',
  title: `as PID 1 of its own PID namespace, SIGTERM to PID 1 (docker stop): the primary exits with code 0 within ${EXIT_DEADLINE_MS / 1000} s`,
  timeoutMs: 30000,
  async run(ctx) {
    if (pid1Unsupported(ctx)) return;
    await ctx.start({}, { prefix: isolationPrefix({ pid1: true }) });
    const nsPid = namespacePidOf(ctx.primaryPid);
    if (nsPid !== 1) throw new Error(`the primary (pid ${ctx.primaryPid}) is pid ${nsPid} in its namespace, not 1`);
    ctx.log(`the primary is pid ${ctx.primaryPid} here and PID 1 in its namespace`);
    const workers = await countWorkers(ctx, WORKERS, { wrongHint: 'fork Number(process.env.WORKERS) workers (the fork lesson).' });
    // Answers carry each worker's pid in the namespace (its process.pid), not this machine's.
    const nsPids = new Map(workers.map((pid) => [pid, namespacePidOf(pid)]));
    ctx.log(`in the namespace the workers are ${[...nsPids.values()].join(', ')} (the pids their answers carry)`);
    const watch = watchShutdown(ctx, 'SIGTERM');
    const clients = startKeepAliveClients(ctx.port, { connections: KEEP_ALIVE_CLIENTS, timeoutMs: 3000, endOnRefusal: () => watch.signalAt !== null });
    ctx.onTeardown(() => clients.stop());
    await ctx.poll(() => new Set(clients.results.filter((r) => r.outcome === 'ok').map((r) => r.conn)).size >= KEEP_ALIVE_CLIENTS, { timeoutMs: 3000 });
    const slow = await startFreshKeepAliveInFlight(ctx, SLOW, { timeoutMs: 8000, then: '/', outliveStep: true, freshMs: (SLOW_MS * 3) / 4 });
    ctx.onTeardown(() => slow.stop());
    ctx.log(`${KEEP_ALIVE_CLIENTS} keep-alive clients running; ${SLOW} in flight on worker ${slow.pid ?? '?'}`);
    watch.sent();
    ctx.log(`kill -TERM ${ctx.primaryPid}   (PID 1 of the namespace, from outside it: what docker stop sends)`);
    ctx.program.signalPrimary('SIGTERM');
    // From the signal on, alongside the wait for the exit: judged by pid1-stops-accepting.
    const accepting = watchStopsAccepting(ctx, { withinMs: STOP_ACCEPTING_MS });
    const state = { watch, clients, slow, nsPids, accepting };
    ctx.data.pid1 = state;
    const atExit = await exitWithinDeadline(watch);
    if (!atExit) {
      const alive = ctx.workers();
      const fresh = await ctx.request('/', { timeoutMs: 1000 });
      const untouched = alive.length === workers.length && workers.every((p) => alive.includes(p)) && fresh.ok && [...nsPids.values()].includes(fresh.pid);
      ctx.fail(`PID 1 was still running ${EXIT_DEADLINE_MS / 1000} s after SIGTERM${untouched ? ', as if the signal never came: its workers still take new connections' : ''}.`, {
        expected: `the primary, PID 1, drains its workers and exits with code 0 within ${EXIT_DEADLINE_MS / 1000} s of SIGTERM`,
        actual: `the primary and ${alive.length} workers (${alive.join(', ')}) still running${fresh.ok ? `; a new connection answered by worker ${fresh.pid} (its pid in the namespace)` : ''}`,
        explanation: untouched
          ? `${PID1_RULE} Possible causes: no process.on('SIGTERM', ...) in the primary (a program that stops on SIGTERM outside a container only because of the default action), or a handler that does nothing.`
          : 'The shutdown began (the workers no longer take connections the same way) but did not end in time. Possible causes: a worker kept busy by keep-alive clients (Node answers keep-alive unless the worker says Connection: close once its server no longer listens), a timer or a connection that keeps a worker or the primary alive, or a primary that waits for something else before it exits. The graceful-shutdown lesson has the rules: a worker exits within 3 s of its disconnect, and the primary exits once its last worker has exited.',
        reproduce: untouched
          ? ['kill -TERM $(pgrep -P $pid)   # $pid is unshare; its child is node, PID 1 inside: without a handler nothing happens', `${ctx.curl('/')}   # still answered`]
          : ['kill -TERM $(pgrep -P $pid)   # $pid is unshare; its child is node, PID 1 inside', 'ps -o pid,etime,args --ppid $(pgrep -P $pid)   # the workers still alive, and for how long'],
        hint: untouched
          ? "in the primary, process.on('SIGTERM', shutdown): as PID 1 a handler is the only way SIGTERM does anything."
          : "once a worker's server no longer listens, answer with Connection: close (if (!server.listening) res.setHeader('Connection', 'close')), and exit the primary in 'exit' once the last worker is gone.",
        showOutput: true,
      });
    }
    const { exit, exitAt } = atExit;
    if (exit.signal || exit.code !== 0) {
      ctx.fail(`PID 1 ${exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`} after SIGTERM.`, {
        expected: 'exit code 0: a stop that was asked for and went well (Kubernetes and Docker read anything else as a failure)',
        actual: exit.signal ? `killed by ${exit.signal}` : `exit code ${exit.code}`,
        hint: 'process.exit(0) in the primary once its last worker has exited.',
        showOutput: true,
      });
    }
    state.exitMs = Math.round(exitAt - watch.signalAt);
    ctx.log(`PID 1 exited with code 0, ${Math.round(exitAt - watch.signalAt)} ms after SIGTERM (the kernel then ends whatever is left in its namespace)`);
  },
};

const pid1StopsAccepting = {
  id: 'pid1-stops-accepting',
  title: `as PID 1: with the ${SLOW} request in flight, new connections are refused within ${STOP_ACCEPTING_MS / 1000} s of SIGTERM`,
  async run(ctx) {
    const state = ctx.data.pid1;
    if (!state) {
      ctx.attach('skipped', 'with the step before');
      return;
    }
    const seen = await state.accepting;
    if (!seen.refused) {
      const f = stillAcceptingFailure({ port: ctx.port, withinMs: STOP_ACCEPTING_MS, accepted: seen.accepted, signal: 'SIGTERM to PID 1', inFlight: SLOW });
      ctx.fail(f.message, {
        ...f,
        reproduce: [`${ctx.curl(SLOW)} &`, 'kill -TERM $(pgrep -P $pid)   # $pid is unshare; its child is node, PID 1 inside', `sleep 0.5; curl -s http://127.0.0.1:${ctx.port}/   # refused: "Failed to connect"`],
        showOutput: true,
      });
    }
    ctx.log(`new connections refused ${seen.ms} ms after SIGTERM, with ${SLOW} still in flight`);
  },
};

const pid1Drains = {
  id: 'pid1-drains',
  title: `as PID 1: the ${SLOW} request in flight completes with 200 and keep-alive clients are drained, none cut`,
  async run(ctx) {
    const state = ctx.data.pid1;
    if (!state) {
      ctx.attach('skipped', 'with the step before');
      return;
    }
    const { watch, clients, slow, nsPids } = state;
    const r = await slow.result;
    if (!(r.outcome === 'ok' && r.status === 200)) {
      ctx.fail(`The ${SLOW} request in flight at SIGTERM ${r.outcome === 'ok' ? `got status ${r.status}` : r.outcome === 'cut' ? 'was cut after its answer began' : 'was dropped'}.`, {
        expected: 'status 200: the request finishes, then its worker stops',
        actual: r.outcome === 'ok' ? `status ${r.status}` : `${r.outcome} (${r.code ?? 'no answer'})`,
        explanation:
          (state.exitMs !== undefined && state.exitMs < 1000
            ? `The primary (PID 1) exited ${state.exitMs} ms after SIGTERM, before a request that needed about 1 s could finish. `
            : '') +
          'When PID 1 exits, the kernel kills every other process of its namespace at once: a primary that exits before its workers have finished cuts their requests, as does a worker killed or a connection closed before its answer.',
        hint: 'worker.disconnect() on every worker; process.exit(0) in the primary only once the last one has exited.',
        showOutput: true,
      });
    }
    const results = [...(await clients.stop()), ...(await slow.stop()).slice(1)];
    const c = classifyKeepAlive(results, { stoppedAt: watch.signalAt });
    ctx.log(summarizeKeepAlive(results, c));
    // Keyed by the pids the answers carry: the workers' pids in the namespace.
    const lingering = lingeringWorkers(results, new Map([...nsPids.values()].map((pid) => [pid, watch.signalAt])));
    if (lingering.length) {
      const f = lingeringFailure(lingering[0], { what: 'SIGTERM', all: lingering });
      ctx.fail(f.message, { ...f, showOutput: true });
    }
    const problems = describeKeepAliveFailures(c);
    if (problems) {
      ctx.fail(`The keep-alive clients were cut off when PID 1 stopped, not drained: ${problems.split(';')[0]}.`, {
        expected: 'every request answered (one retry allowed for a reset before any byte on a reused connection); no response cut',
        actual: problems,
        explanation: 'When PID 1 exits the kernel SIGKILLs the rest of its namespace: workers must have finished (and told their keep-alive clients Connection: close) before the primary exits.',
        hint: "Connection: close once the server no longer listens (if (!server.listening) res.setHeader('Connection', 'close')); the primary exits after its last worker.",
        showOutput: true,
      });
    }
    ctx.log(`${SLOW} completed with 200; no keep-alive client cut; no worker served one later than ${DRAIN_MS / 1000} s after SIGTERM`);
  },
};

const cpuCount = {
  id: 'cpus',
  title: 'with WORKERS unset on 1 CPU (taskset), the primary forks 1 worker: os.availableParallelism(), not os.cpus().length',
  timeoutMs: 25000,
  async run(ctx) {
    const { taskset, pidNamespace } = isolationSupport();
    if (!taskset.ok) {
      ctx.log(`skipped: ${taskset.reason}; the workshop's doctor command says more`);
      ctx.attach('skipped', taskset.reason);
      return;
    }
    const cpu = allowedCpus()[0] ?? 0;
    if (cpus().length < 2) {
      ctx.log(`skipped: this machine has ${cpus().length} CPU, so os.cpus().length and the CPUs a process may use cannot differ here`);
      ctx.attach('skipped', 'one CPU: nothing to restrict');
      return;
    }
    await ctx.start({ WORKERS: null }, { prefix: isolationPrefix({ pid1: pidNamespace.ok, cpus: [cpu] }) });
    ctx.data.cpusStarted = true;
    const r = await ctx.waitForWorkers(1, { timeoutMs: 4000 });
    if (!r.ok) {
      const n = r.value.length;
      ctx.fail(`With WORKERS unset and 1 CPU to run on, the primary forked ${n} worker${n === 1 ? '' : 's'}.`, {
        expected: '1 worker: os.availableParallelism() is 1 when the process may use 1 CPU',
        actual: `${n} workers (${r.value.join(', ')}); this machine has ${cpus().length} CPUs${n === cpus().length ? ': the count of os.cpus().length' : ''}`,
        explanation:
          'A container is given fewer CPUs than its host has (docker run --cpuset-cpus, --cpus; Kubernetes CPU limits). os.cpus() lists every CPU of the host, whatever the process may use: each extra worker only competes for the same CPU, with its own memory. os.availableParallelism() follows the CPU affinity (and, on newer Node 22 and 24, the cgroup CPU quota).',
        reproduce: `taskset -c ${cpu} env -u WORKERS PORT=3000 node ${basename(ctx.file)}   # then: pgrep -P <pid> | wc -l`,
        hint: 'Number(process.env.WORKERS) || os.availableParallelism()',
        showOutput: true,
      });
    }
    ctx.log(`1 worker (${r.value[0]}) on CPU ${cpu}, where os.cpus().length is ${cpus().length}`);
  },
};

/** Processes of the group that are zombies (dead, not reaped by their parent), from /proc. */
function zombiesOf(pgid) {
  const out = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let text;
    try {
      text = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue;
    }
    const f = text.slice(text.lastIndexOf(')') + 2).split(' ');
    if (f[0] === 'Z' && Number(f[2]) === pgid) out.push({ pid: Number(name), ppid: Number(f[1]) });
  }
  return out;
}

const noZombie = {
  id: 'no-zombie',
  title: 'as PID 1: a worker killed (SIGKILL) is reaped and replaced, no zombie is left',
  timeoutMs: 15000,
  async run(ctx) {
    if (pid1Unsupported(ctx)) return;
    // The program of the cpus step (PID 1, one CPU, one worker) when it still runs, else a fresh PID 1.
    let expected = 1;
    if (!ctx.data.cpusStarted || ctx.program?.exited || ctx.program?.prefix?.forks !== true) {
      await ctx.start({}, { prefix: isolationPrefix({ pid1: true }) });
      expected = WORKERS;
    }
    const workers = await countWorkers(ctx, expected, { timeoutMs: 4000, context: expected === 1 ? '1 CPU, WORKERS unset' : `WORKERS=${WORKERS}` });
    const victim = workers[0];
    ctx.killWorker(victim, 'SIGKILL');
    const reaped = await ctx.poll(() => isReaped(victim), { timeoutMs: 2000, intervalMs: 10 });
    const zombies = zombiesOf(ctx.program.leaderPid);
    if (!reaped.ok || zombies.length) {
      ctx.fail(`A dead process is left as a zombie in the namespace${zombies.length ? `: ${zombies.map((z) => z.pid).join(', ')}` : ` (worker ${victim})`}.`, {
        expected: 'the dead worker is reaped by its parent (the primary, PID 1) at once',
        actual: `${zombies.length || 1} zombie process${zombies.length > 1 ? 'es' : ''} 2 s after the death`,
        explanation:
          'A process that ends stays in the process table (a zombie) until its parent collects its exit status. Node reaps the workers it forked, but not processes that become its children because their own parent died (orphans are handed to PID 1): run the image with docker run --init or ENTRYPOINT ["tini", "--"], which reap them.',
        hint: 'docker run --init, or ENTRYPOINT ["tini", "--"] in the Dockerfile, if your workers start processes of their own.',
        showOutput: true,
      });
    }
    const back = await ctx.waitForWorkers(workers.length, { timeoutMs: 4000, accept: (pids) => !pids.includes(victim) });
    if (!back.ok) {
      ctx.fail(`Worker ${victim} was killed and not replaced: ${back.value.length} worker${back.value.length === 1 ? '' : 's'} left.`, {
        expected: `${workers.length} workers again (the respawn lesson)`,
        actual: `${back.value.length}: ${back.value.join(', ')}`,
        hint: "cluster.on('exit', ...) forks a replacement when the cluster is not shutting down.",
        showOutput: true,
      });
    }
    ctx.log(`worker ${victim} reaped within ${Math.round(reaped.ms)} ms and replaced; no zombie in the namespace`);
  },
};

export default {
  env: { WORKERS: String(WORKERS), SHUTDOWN_TIMEOUT: '5000' },
  before: [dockerfileCmd, dockerfileUser, dockerfileEnv],
  steps: [pid1Sigterm, pid1StopsAccepting, pid1Drains, cpuCount, noZombie],
};
