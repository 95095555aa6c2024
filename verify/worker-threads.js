// The worker-threads lesson (worker-threads): one process whose /heavy runs on a fixed
// pool of THREADS worker threads. Checks, with real traffic: one process;
// /heavy answers from a thread (threadId not 0); the main thread's event loop
// answers GET / while 2 x THREADS /heavy requests burn; the OS thread count
// stays within the pool's size (Linux); a burst takes about 2 rounds with at
// most THREADS threads (a queue, neither one at a time nor a thread per
// request); a throwing task answers 500 and the pool serves on with THREADS
// threads; without THREADS, os.availableParallelism() threads; SIGTERM ends
// it with exit code 0.
//
// Every timing judgement is a ratio or a bound a factor away from both
// verdicts: a busy loop is wall-clock time (Date.now()), so a 300 ms task takes
// 300 ms however loaded the 2 cores are; a round is measured by the burst's
// own first answer, not by a figure from another moment.
import { availableParallelism } from 'node:os';
import { setMaxListeners } from 'node:events';
import { request, describeResult } from '../lib/harness/http.js';
import { EXIT_DEADLINE_MS } from './shared/shutdown.js';
import { sampleThreads, threadCount, countedThreads, describeThreads } from './shared/threads.js';

const THREADS = 3;
const HEAVY_MS = 300;
const HEAVY = `/heavy?ms=${HEAVY_MS}`;
const THROWS = '/heavy?ms=-1';
// A free event loop answers GET / in a few ms, tens on a loaded machine; a
// blocked one only once the 300 ms task it runs is done (and the tasks read
// before the probe): at least about 300 ms.
const FREE_LOOP_MS = 200;
const PROBES = 3;
const PROBE_ATTEMPTS = 3;
// Threads the process may have beyond its count at start and the pool's own.
const THREAD_MARGIN = 2;
const RECOVERY_MS = 5000;
const QUEUE_ATTEMPTS = 2;
const SETTLE_MS = 300;
const SETTLE_MAX_MS = 3000;
const BURST_TIMEOUT_MS = 15000;
// The steps whose answers may come late without being wrong (a thread per
// request loads its modules for every task).
const SLOW_STEP_MS = 30000;

const NO_PROC = 'this system has no /proc (macOS): the OS thread count cannot be read, so this check is skipped';

/**
 * n /heavy requests that reach the program at once: every connection opens
 * first, then all requests are written together, and `probes` GET / right
 * after them, so the program has read the /heavy requests before the probes
 * (an event loop takes ready sockets in the order they became ready).
 * Samples the OS thread count while they run.
 * @returns {Promise<{ results: object[], probes: object[], at: number[], threads: object }>}
 *   at: when each /heavy answer came, in ms after the requests were released
 */
async function burst(ctx, n, { path = HEAVY, timeoutMs = BURST_TIMEOUT_MS, probes = 0 } = {}) {
  let release;
  const gate = new Promise((r) => (release = r));
  const total = n + probes;
  let connected = 0;
  let allConnected;
  const connectedAll = new Promise((r) => (allConnected = r));
  let releasedAt;
  // Requests are written in the order they were made: the gate's callbacks
  // run in the order they were registered.
  // One listener on the step's signal for the whole burst (Node warns past
  // 10 listeners on one signal, and a burst may hold 2 x cores requests).
  const stop = new AbortController();
  setMaxListeners(total + 2, stop.signal);
  const onStepEnd = () => stop.abort(ctx.signal.reason);
  ctx.signal.addEventListener('abort', onStepEnd, { once: true });
  const send = (p) =>
    request(ctx.port, p, {
      timeoutMs,
      signal: stop.signal,
      gate,
      onConnected: () => ++connected === total && allConnected(),
    }).then((r) => ({ ...r, at: Math.round(performance.now() - releasedAt) }));
  const pending = Array.from({ length: n }, () => send(path));
  const probing = Array.from({ length: probes }, () => send('/'));
  await connectedAll;
  const threads = sampleThreads(ctx.primaryPid, { signal: stop.signal });
  releasedAt = performance.now();
  release();
  const results = await Promise.all(pending);
  threads.stop();
  ctx.signal.removeEventListener('abort', onStepEnd);
  return { results, probes: await Promise.all(probing), at: results.map((r) => r.at), threads };
}

/** The thread ids and answer times of a burst, for logs and messages. */
function describeBurst(b) {
  return b.results.map((r) => `${r.json?.threadId ?? '?'}@${r.at}ms`).join(', ');
}

/** Fails unless every answer of a burst is 200 JSON with this process's pid, ms and a threadId that is not 0. */
function expectHeavyAnswers(ctx, b, what) {
  for (const r of b.results) {
    ctx.expectJson(r);
    expectThreadAnswer(ctx, r, what);
  }
}

function expectThreadAnswer(ctx, r, what) {
  const threadId = r.json.threadId;
  if (threadId === undefined) {
    ctx.fail(`${what}: GET /heavy answered without "threadId".`, {
      expected: '{ "pid", "ms", "threadId" }: threadId of the worker thread that ran the loop',
      actual: describeResult(r),
      reproduce: ctx.curl(HEAVY),
      hint: "in the thread, import { threadId } from 'node:worker_threads' and send it back with the result; the main thread puts it in the answer.",
    });
  }
  if (threadId === 0) {
    ctx.fail(`${what}: GET /heavy answered "threadId": 0, the main thread's id.`, {
      expected: 'the threadId of a worker thread (1 or more)',
      actual: describeResult(r),
      explanation: 'threadId is 0 only on the main thread: the busy loop ran there, so while it runs the event loop answers nothing else.',
      reproduce: ctx.curl(HEAVY),
      hint: 'post the task to a thread of the pool (worker.postMessage) and run the loop in the thread, where threadId is 1 or more.',
    });
  }
  if (!Number.isInteger(threadId) || threadId < 0) {
    ctx.fail(`${what}: GET /heavy answered a "threadId" that is not a thread id.`, {
      expected: 'an integer, the threadId (from node:worker_threads) of the thread that ran the loop',
      actual: describeResult(r),
      reproduce: ctx.curl(HEAVY),
    });
  }
  if (r.pid !== ctx.primaryPid) {
    ctx.fail(`${what}: GET /heavy answered with a pid that is not the process the verifier started.`, {
      expected: `"pid": ${ctx.primaryPid} (threads share their process's pid)`,
      actual: describeResult(r),
      explanation: 'A different pid means another process ran the task (a child process): this lesson runs it on a thread of the same process.',
      reproduce: ctx.curl(HEAVY),
    });
  }
}

/**
 * OS threads per thread of the pool: 1, or 2 when the program runs with the
 * workshop's module fallback (its folder has no node_modules), whose loader
 * thread every worker thread gets too.
 */
function osThreadsPerThread(ctx) {
  return 1 + (ctx.program.loaderThreadsPerThread ?? 0);
}

/**
 * The thread count at start, once it has settled: threads a pool starts at
 * start-up are running before the program answers, but each may start a
 * thread of its own a moment later (the module loader's). Unchanged for
 * SETTLE_MS, at most SETTLE_MAX_MS (then the highest count seen). Sets
 * ctx.data.idleThreads; returns the threads (null without /proc).
 */
async function settledThreads(ctx) {
  let threads = countedThreads(ctx.primaryPid);
  if (!threads) {
    ctx.data.idleThreads = null;
    return null;
  }
  let highest = threads.length;
  let since = performance.now();
  await ctx.poll(
    () => {
      const now = countedThreads(ctx.primaryPid) ?? threads;
      if (now.length !== threads.length) since = performance.now();
      threads = now;
      highest = Math.max(highest, now.length);
      return performance.now() - since >= SETTLE_MS;
    },
    { timeoutMs: SETTLE_MAX_MS, intervalMs: 20 },
  );
  ctx.data.idleThreads = highest;
  return threads;
}

/** The OS thread bound: the count at start, plus the pool, plus a margin. */
function threadBound(ctx, size) {
  return ctx.data.idleThreads + size * osThreadsPerThread(ctx) + THREAD_MARGIN;
}

/** "14 at start + THREADS=3 + 2", for messages. */
function describeBound(ctx, size, name) {
  const per = osThreadsPerThread(ctx);
  const pool = per === 1 ? `${name}=${size}` : `${name}=${size} x ${per} (each thread also runs the workshop's module loader: your folder has no node_modules)`;
  return `${ctx.data.idleThreads} at start + ${pool} + ${THREAD_MARGIN}`;
}

/** Fails when a burst's sampled peak thread count went over the bound. */
function expectThreadsWithin(ctx, watch, size, what, name = 'THREADS') {
  if (!watch.supported) return;
  const limit = threadBound(ctx, size);
  ctx.log(`OS threads during ${what}: at most ${watch.peak} (${watch.samples} samples; limit ${limit} = ${describeBound(ctx, size, name)})`);
  if (watch.peak <= limit) return;
  ctx.fail(`The process had ${watch.peak} threads during ${what}; a pool of ${size} allows at most ${limit}.`, {
    expected: `at most ${limit} OS threads: ${describeBound(ctx, size, name)}`,
    actual: `${watch.peak} threads at the peak (${describeThreads(watch.peakThreads)})`,
    explanation:
      'More threads than the pool may have: a new Worker per request, or a pool that starts another thread whenever all of its threads are busy, turns a burst of requests into a burst of threads, each with a heap of its own, until the process runs out of memory.',
    reproduce: [`for i in $(seq ${2 * size}); do ${ctx.curl(HEAVY)} & done`, `ls /proc/${ctx.primaryPid}/task | wc -l   # while they run`],
    hint: `start ${size} threads once (Number(process.env.THREADS) || os.availableParallelism()) and queue the tasks that find them all busy; with piscina, minThreads and maxThreads both ${size}.`,
  });
}

/**
 * A warm-up of `size` requests (a pool that starts threads on demand starts
 * them all), then a burst of 2 x size, which a pool of `size` serves in 2
 * rounds: never more than `size` different threads, all `size` of them
 * working, in about twice the time of one task (one at a time would be
 * 2 x size times), with the thread count within the bound. More threads
 * fails at once; fewer threads or turns are judged on a second burst too,
 * since a loaded machine can keep one thread off the CPU for a round.
 */
async function checkQueueing(ctx, size, context) {
  const which = context.startsWith('THREADS') ? 'THREADS' : 'os.availableParallelism()';
  const warm = await burst(ctx, size);
  expectHeavyAnswers(ctx, warm, 'the warm-up');
  ctx.log(`warm-up of ${size}: ${describeBurst(warm)}`);
  expectThreadsWithin(ctx, warm.threads, size, `a warm-up of ${size} requests`, which);

  const n = 2 * size;
  const rounds = n / size;
  // Halfway between the rounds of a right pool and one task at a time.
  const maxTimeRounds = (rounds + n) / 2;
  const reproduce = `time (for i in $(seq ${n}); do ${ctx.curl(HEAVY)}; echo & done; wait)`;
  let failure;
  for (let attempt = 1; attempt <= QUEUE_ATTEMPTS; attempt++) {
    const b = await burst(ctx, n);
    expectHeavyAnswers(ctx, b, `a burst of ${n}`);
    const perThread = new Map();
    for (const r of b.results) perThread.set(r.json.threadId, (perThread.get(r.json.threadId) ?? 0) + 1);
    const shares = [...perThread].map(([id, k]) => `thread ${id}: ${k}`).join(', ');
    const timeRounds = Math.max(...b.at) / Math.min(...b.at);
    ctx.log(`burst of ${n} x ${HEAVY} (${context}): answers ${describeBurst(b)}; tasks per thread: ${shares}; last/first answer = ${timeRounds.toFixed(2)}`);
    expectThreadsWithin(ctx, b.threads, size, `a burst of ${n} requests`, which);
    if (perThread.size > size) {
      ctx.fail(`${perThread.size} different threads answered a burst of ${n} requests, ${context}.`, {
        expected: `at most ${size} different threadIds: a fixed pool of ${size} threads`,
        actual: `tasks per thread: ${shares}`,
        explanation: `A pool larger than ${size}, a pool that grows when every thread is busy, or a new thread per request (or per task): the pool's size must follow ${which}.`,
        reproduce,
        hint: 'start Number(process.env.THREADS) || os.availableParallelism() threads once; tasks that find them all busy wait in a queue.',
      });
    }
    if (perThread.size < size) {
      const one = perThread.size === 1;
      failure = [`A burst of ${n} requests was served by ${one ? 'one thread: one thread ran every task' : `only ${perThread.size} threads`}, ${context}.`, {
        expected: `${size} threads working at once, about ${rounds} tasks each (${rounds} rounds)`,
        actual: `tasks per thread: ${shares}${attempt > 1 ? ', in each of 2 bursts' : ''}`,
        explanation: one
          ? 'A pool of 1 runs the tasks one at a time, like the bottleneck lesson, only off the main thread.'
          : `The pool has fewer threads than ${size}: its size must follow ${which}.`,
        reproduce,
        hint: 'the pool size is Number(process.env.THREADS) || os.availableParallelism(), and every free thread takes the next task.',
      }];
    } else if (size > 1 && timeRounds > maxTimeRounds) {
      failure = [`A burst of ${n} requests took ${timeRounds.toFixed(1)} times as long as one task, ${context}: the tasks ran one at a time.`, {
        expected: `about ${rounds} times one task (at most ${maxTimeRounds}): ${size} threads working at once`,
        actual: `the last answer came ${timeRounds.toFixed(2)} times as late as the first (answers, threadId@ms: ${describeBurst(b)})${attempt > 1 ? ', in each of 2 bursts' : ''}`,
        explanation: `The threads took turns: the pool sends a task only when the one before has finished (a lock or an await around the whole pool), so ${size} threads do the work of one.`,
        reproduce,
        hint: 'hand a task to every free thread at once; only tasks that find no free thread wait.',
      }];
    } else {
      return;
    }
  }
  ctx.fail(...failure);
}

export default {
  clustered: false,
  env: { THREADS: String(THREADS) },
  steps: [
    {
      id: 'one-process',
      title: 'is one process, without cluster workers or child processes',
      async run(ctx) {
        const workers = ctx.workers();
        if (workers.length > 0) {
          ctx.fail(`Your program forked ${workers.length} cluster worker${workers.length === 1 ? '' : 's'}: this lesson is one process with threads.`, {
            expected: 'one process; the work goes to worker threads inside it',
            actual: `cluster workers ${workers.join(', ')} (primary ${ctx.primaryPid})`,
            explanation: 'cluster is the fork lesson: processes that each run the whole server. Here one process keeps its event loop free by handing /heavy to a pool of threads.',
            reproduce: `pgrep -P ${ctx.primaryPid}   # the processes it started`,
            hint: "no cluster.fork(): new Worker(new URL(import.meta.url)) from 'node:worker_threads' starts a thread.",
          });
        }
        const others = ctx.program.processes({ includeMarked: false }).filter((p) => p.pid !== ctx.primaryPid);
        if (others.length > 0) {
          ctx.fail(`Your program started ${others.length} other process${others.length === 1 ? '' : 'es'}: this lesson is one process with threads.`, {
            expected: 'one process',
            actual: others.map((p) => `${p.pid} (${p.comm})`).join(', '),
            reproduce: `pgrep -P ${ctx.primaryPid}`,
            hint: "worker threads, not child processes: new Worker() from 'node:worker_threads'.",
          });
        }
        const r = await ctx.get('/');
        if (r.pid !== ctx.primaryPid) {
          ctx.fail('GET / answered with a pid that is not the process the verifier started.', {
            expected: `"pid": ${ctx.primaryPid}`,
            actual: `"pid": ${r.pid}`,
            reproduce: ctx.curl('/'),
            hint: 'answer with res.json({ pid: process.pid }).',
          });
        }
        const threads = await settledThreads(ctx);
        ctx.log(threads ? `one process, ${threads.length} OS threads at start (${describeThreads(threads)})` : `one process; ${NO_PROC}`);
      },
    },
    {
      id: 'heavy-on-thread',
      title: `GET ${HEAVY} burns about ${HEAVY_MS} ms on a worker thread and answers { pid, ms, threadId }`,
      // A slow answer is no finding here (this step judges what it says and
      // how long the loop ran, never how late it came): a program that starts
      // threads per request, each loading its modules, took over 10 s to
      // answer one beside three busy test lanes, and timed out here instead
      // of failing thread-count with its cause.
      timeoutMs: SLOW_STEP_MS,
      async run(ctx) {
        const r = await ctx.get(HEAVY, { timeoutMs: SLOW_STEP_MS - 5000 });
        ctx.log(`GET ${HEAVY} -> ${r.text} in ${r.ms} ms`);
        expectThreadAnswer(ctx, r, `GET ${HEAVY}`);
        if (Number(r.json.ms) !== HEAVY_MS) {
          ctx.fail(`GET ${HEAVY} did not answer the ms it was asked for.`, {
            expected: `{ "pid", "ms": ${HEAVY_MS}, "threadId" }`,
            actual: r.text,
            reproduce: ctx.curl(HEAVY),
          });
        }
        // Timers fire a millisecond or so early at worst; well under is no busy loop.
        if (r.ms < HEAVY_MS - 10) {
          ctx.fail(`GET ${HEAVY} answered after ${r.ms} ms.`, {
            expected: `at least ${HEAVY_MS} ms: the thread keeps the CPU busy for ms milliseconds`,
            actual: `${r.ms} ms`,
            reproduce: `time ${ctx.curl(HEAVY)}`,
            hint: 'in the thread: const end = Date.now() + ms; while (Date.now() < end) {}',
          });
        }
      },
    },
    {
      id: 'thread-count',
      title: `the process never has more OS threads than at start + ${THREADS} + ${THREAD_MARGIN}`,
      // As heavy-on-thread: the programs that fail here are the ones that
      // start threads per request, slow to answer on a busy machine.
      timeoutMs: SLOW_STEP_MS,
      async run(ctx) {
        const n = 2 * THREADS;
        const b = await burst(ctx, n, { timeoutMs: SLOW_STEP_MS - 5000 });
        if (!b.threads.supported) {
          ctx.log(`skipped: ${NO_PROC}`);
          return;
        }
        expectThreadsWithin(ctx, b.threads, THREADS, `a burst of ${n} requests`);
      },
    },
    {
      id: 'event-loop-free',
      title: `while ${2 * THREADS} ${HEAVY} run, GET / answers within ${FREE_LOOP_MS} ms`,
      timeoutMs: 30000,
      async run(ctx) {
        const n = 2 * THREADS;
        // GET / sent right behind the burst: a main thread that runs the loop
        // itself reaches them only after a 300 ms task at least, every time. A
        // free one answers at once, unless this verifier was kept off the CPU
        // at that moment (2 shared cores): then another burst, up to 3.
        const tries = [];
        for (let attempt = 1; attempt <= PROBE_ATTEMPTS; attempt++) {
          const b = await burst(ctx, n, { probes: PROBES });
          const lost = b.probes.find((p) => !p.ok || p.status !== 200);
          if (lost) {
            ctx.fail(`GET / failed while ${n} ${HEAVY} requests ran.`, {
              expected: 'status 200 with {"pid":...}',
              actual: describeResult(lost),
              reproduce: [`for i in $(seq ${n}); do ${ctx.curl(HEAVY)} & done`, `time ${ctx.curl('/')}`],
              showOutput: true,
            });
          }
          expectHeavyAnswers(ctx, b, `a burst of ${n}`);
          const fastest = Math.min(...b.probes.map((p) => p.ms));
          tries.push(fastest);
          ctx.log(`burst ${attempt}: ${PROBES} GET / sent with it answered in ${b.probes.map((p) => p.ms).join(', ')} ms; /heavy answers ${describeBurst(b)}`);
          if (fastest <= FREE_LOOP_MS) return;
        }
        ctx.fail(`GET / took ${Math.min(...tries)} ms or more while ${n} ${HEAVY} requests ran.`, {
          expected: `GET / answered within ${FREE_LOOP_MS} ms: the main thread's event loop is free while the threads burn`,
          actual: `the fastest of ${PROBES} GET / sent with each of ${PROBE_ATTEMPTS} bursts: ${tries.join(', ')} ms`,
          explanation:
            'Something kept the main thread busy while the tasks ran, so GET / waited, as in the bottleneck lesson. Usually the busy loop runs on the main thread (perhaps beside a thread that only does the bookkeeping), or the main thread waits for the thread synchronously (Atomics.wait, a sync call).',
          reproduce: [`for i in $(seq ${n}); do ${ctx.curl(HEAVY)} & done`, `time ${ctx.curl('/')}`],
          hint: 'the loop runs only in the thread: the main thread posts { ms } to it and awaits the answer (a promise), never blocking.',
        });
      },
    },
    {
      id: 'queueing',
      title: `a burst of ${2 * THREADS} ${HEAVY} takes about 2 rounds on ${THREADS} threads`,
      timeoutMs: 20000,
      async run(ctx) {
        await checkQueueing(ctx, THREADS, `THREADS=${THREADS}`);
      },
    },
    {
      id: 'throwing-task',
      title: `GET ${THROWS} answers 500 and the pool serves on with ${THREADS} threads`,
      timeoutMs: 20000,
      async run(ctx) {
        const thrown = await burst(ctx, THREADS, { path: THROWS, timeoutMs: 5000 });
        for (const r of thrown.results) {
          if (r.ok && r.status === 500) continue;
          const exit = r.ok ? null : await ctx.program.waitForExit(1000);
          ctx.fail(
            exit
              ? `Your program exited when a task threw (${exit.signal ? `killed by ${exit.signal}` : `exit code ${exit.code}`}).`
              : `GET ${THROWS} ${r.ok ? `answered status ${r.status}` : 'got no answer'}.`,
            {
              expected: `status 500 for each of ${THREADS} GET ${THROWS} sent at once: the task throws on its thread`,
              actual: describeResult(r),
              explanation: exit
                ? "An error that a thread does not catch ends the thread and is emitted as 'error' on its Worker; with no 'error' listener it is thrown in the main thread, which ends the whole process."
                : r.ok && r.status === 200
                  ? 'A negative ms must make the task throw (new RangeError(...)), and the error must reach the request as a 500.'
                  : "The task's error never reached the request: a pool whose thread died with the task (no 'error' or 'exit' listener to reject it) leaves the request waiting forever.",
              reproduce: `curl -s -i http://127.0.0.1:${ctx.port}${THROWS}`,
              hint: "in the thread, try { ... } catch (err) { parentPort.postMessage({ error: err.message }) }; in the main thread, answer res.status(500).json({ pid: process.pid, error }). Listen for 'error' and 'exit' on every Worker.",
              showOutput: true,
            },
          );
        }
        ctx.log(`${THREADS} x GET ${THROWS} -> 500 (${thrown.results[0].text})`);

        // A pool that replaces its threads needs a moment to start them:
        // bursts of THREADS until one is served by THREADS threads at once.
        const deadline = performance.now() + RECOVERY_MS;
        let last;
        for (;;) {
          const left = Math.max(500, deadline - performance.now());
          last = await burst(ctx, THREADS, { timeoutMs: Math.min(left + HEAVY_MS, RECOVERY_MS) });
          const served = last.results.every((r) => r.ok && r.status === 200 && Number.isInteger(r.json?.threadId));
          const ids = new Set(last.results.map((r) => r.json?.threadId));
          if (served && ids.size === THREADS) break;
          if (performance.now() >= deadline || !served) {
            const failed = last.results.find((r) => !r.ok || r.status !== 200);
            ctx.fail(
              failed
                ? `After ${THREADS} tasks threw, GET ${HEAVY} ${failed.ok ? `answered status ${failed.status}` : 'got no answer'}.`
                : `After ${THREADS} tasks threw, only ${ids.size} of ${THREADS} threads served a burst of ${THREADS} requests.`,
              {
                expected: `within ${RECOVERY_MS / 1000} s, ${THREADS} ${HEAVY} sent at once answered 200 by ${THREADS} different threads: the pool keeps THREADS=${THREADS} threads`,
                actual: failed ? describeResult(failed) : `threadIds ${describeBurst(last)}`,
                explanation:
                  "The pool lost threads to the errors: a thread that died with its task was not replaced. Either catch the error in the thread (it then goes on), or start a new thread in the Worker's 'exit' handler.",
                reproduce: [`for i in $(seq ${THREADS}); do curl -s ${`http://127.0.0.1:${ctx.port}${THROWS}`} & done; wait`, `for i in $(seq ${THREADS}); do ${ctx.curl(HEAVY)} & done; wait`],
                hint: "try/catch around the task in the thread, or worker.on('exit', () => replace it) in the pool.",
                showOutput: true,
              },
            );
          }
        }
        ctx.log(`then ${THREADS} x ${HEAVY}: ${describeBurst(last)}`);

        // Once the errors are behind it, the pool is back to its size.
        if (ctx.data.idleThreads === null) return;
        const limit = threadBound(ctx, THREADS);
        const settled = await ctx.poll(() => (threadCount(ctx.primaryPid) ?? 0) <= limit, { timeoutMs: 2000 });
        const now = countedThreads(ctx.primaryPid) ?? [];
        if (!settled.ok) {
          ctx.fail(`After ${THREADS} tasks threw, the process has ${now.length} threads; a pool of ${THREADS} allows at most ${limit}.`, {
            expected: `at most ${limit} OS threads: ${describeBound(ctx, THREADS, 'THREADS')}`,
            actual: `${now.length} threads 2 s after the burst (${describeThreads(now)})`,
            explanation: 'The pool replaced threads that had not died, or replaced each dead thread more than once (in both its error and exit handlers): it grows with every error.',
            reproduce: [`curl -s http://127.0.0.1:${ctx.port}${THROWS}`, `ls /proc/${ctx.primaryPid}/task | wc -l`],
            hint: "replace a thread once, in its 'exit' handler only.",
          });
        }
        ctx.log(`${now.length} OS threads after the errors (limit ${limit})`);
      },
    },
    {
      id: 'default-threads',
      title: 'started without THREADS, the pool has os.availableParallelism() threads',
      timeoutMs: 30000,
      async run(ctx) {
        const size = availableParallelism();
        ctx.log(`starting again without THREADS; this machine has availableParallelism() = ${size}`);
        await ctx.start({ THREADS: null });
        await settledThreads(ctx);
        await checkQueueing(ctx, size, `without THREADS (os.availableParallelism() = ${size})`);
      },
    },
    {
      id: 'sigterm',
      title: `SIGTERM terminates the threads and exits with code 0 within ${EXIT_DEADLINE_MS / 1000} s`,
      async run(ctx) {
        const program = ctx.program;
        const pid = ctx.primaryPid;
        ctx.signalPrimary('SIGTERM');
        const exit = await program.waitForExit(EXIT_DEADLINE_MS);
        if (exit && !exit.signal && exit.code === 0) {
          ctx.log('exited with code 0');
          return;
        }
        const threads = exit ? null : countedThreads(pid);
        let message;
        let explanation;
        let hint;
        if (!exit) {
          message = `The process was still running ${EXIT_DEADLINE_MS / 1000} s after SIGTERM.`;
          explanation =
            'A SIGTERM handler replaces the default (exit at once); after it, live worker threads keep the process running until they are terminated, as does a server that is not closed.';
          hint = "in the SIGTERM handler: await Promise.all(threads.map((t) => t.terminate())) (piscina: await pool.destroy()), then process.exit(0).";
        } else if (exit.signal === 'SIGTERM') {
          message = 'SIGTERM killed the process: it has no SIGTERM handler.';
          explanation = 'Killed by a signal is not a clean exit: systemd and container runtimes count it as a failure. A handler terminates the threads, then exits with code 0.';
          hint = "process.on('SIGTERM', async () => { server.close(); await pool.close(); process.exit(0); })";
        } else {
          message = `After SIGTERM the process ${exit.signal ? `was killed by ${exit.signal}` : `exited with code ${exit.code}`}.`;
          explanation = 'A clean stop exits with code 0.';
          hint = 'process.exit(0) once the threads are terminated.';
        }
        ctx.fail(message, {
          expected: `exit code 0 within ${EXIT_DEADLINE_MS / 1000} s of SIGTERM`,
          actual: exit ? (exit.signal ? `killed by ${exit.signal}` : `exit code ${exit.code}`) : `still running, ${threads?.length ?? '?'} threads (${describeThreads(threads)})`,
          explanation,
          reproduce: [`${program.commandLine()} & pid=$!`, 'kill -TERM $pid; wait $pid; echo "exit code $?"'],
          hint,
          showOutput: true,
        });
      },
    },
  ],
};
