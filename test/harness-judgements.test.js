// The harness's pure judgement rules, each on its own, with the evidence
// handed in: when a program has settled on another port than PORT, why a
// program never answered or exited early, how failed requests are counted,
// the fork watchdog's limit and trip, waits that an aborted signal stops at
// once, the shell lines a failure prints, and the solution diff shown after
// a pass. Whole-program runs exercise these only in passing.
import { WrongPortWatch, explainSilence, explainExit } from '../lib/harness/readiness.js';
import { forkLimit, watchForks } from '../lib/harness/watchdog.js';
import { sleepFor, pollUntil } from '../lib/harness/wait.js';
import { failed, summarizeFailures } from '../lib/harness/load.js';
import { curlFor } from '../lib/harness/http.js';
import { StepFailure, formatFailure } from '../lib/harness/failure.js';
import { todosOf, addedLines, markedSolution } from '../lib/cli/solution-view.js';
import { until } from './helpers/until.js';

describe('WrongPortWatch: a program that settled on another port than PORT', () => {
  const PORT = 40000;
  const watch = () => new WrongPortWatch(PORT, { graceMs: 1000, idleWindowMs: 500, idleCpuSeconds: 0.03 });

  test('is told so once it has listened elsewhere for the grace and been idle over the window', () => {
    const w = watch();
    expect(w.observe({ now: 0, ports: [3000], cpuSeconds: 0.2 })).toBeNull();
    expect(w.observe({ now: 600, ports: [3000], cpuSeconds: 0.21 })).toBeNull(); // within the grace
    expect(w.observe({ now: 1000, ports: [3000], cpuSeconds: 0.21 })).toEqual([3000]);
  });

  test('is not judged while it still uses the CPU (still starting; PORT may come next)', () => {
    const w = watch();
    w.observe({ now: 0, ports: [9090], cpuSeconds: 0 });
    w.observe({ now: 700, ports: [9090], cpuSeconds: 0.3 });
    expect(w.observe({ now: 1200, ports: [9090], cpuSeconds: 0.5 })).toBeNull();
    // Idle from then on: judged once a whole idle window has passed.
    expect(w.observe({ now: 1500, ports: [9090], cpuSeconds: 0.5 })).toBeNull();
    expect(w.observe({ now: 1800, ports: [9090], cpuSeconds: 0.51 })).toEqual([9090]);
  });

  test('a program that also listens on PORT, or on nothing yet, is never judged, and the grace starts again', () => {
    const w = watch();
    w.observe({ now: 0, ports: [9090], cpuSeconds: 0 });
    expect(w.observe({ now: 2000, ports: [9090, PORT], cpuSeconds: 0 })).toBeNull();
    expect(w.observe({ now: 2500, ports: [], cpuSeconds: 0 })).toBeNull();
    expect(w.observe({ now: 3000, ports: [9090], cpuSeconds: 0 })).toBeNull(); // the grace starts again here
    expect(w.observe({ now: 3900, ports: [9090], cpuSeconds: 0 })).toBeNull();
    expect(w.observe({ now: 4000, ports: [9090, 3000], cpuSeconds: 0 })).toEqual([3000, 9090]);
  });
});

describe('explainSilence: why nothing answered', () => {
  const base = { port: 40000 };
  test.each([
    ['listening on PORT but only on ::1', { onPort: [{ address: '::1', reachable: false }] }, 'only on the address ::1'],
    ['listening elsewhere', { elsewhere: [3000] }, 'It listens on port 3000 instead'],
    ['EADDRINUSE in its output', { addrInUse: true }, 'EADDRINUSE'],
    ['busy at start-up', { cpuSeconds: 4, ranSeconds: 5 }, 'it is busy'],
    ['busy at start-up and still at the deadline', { cpuSeconds: 4, ranSeconds: 5, busyNow: true }, 'it is busy'],
    // Workers that loaded express for a while, then sat idle never listening (seen under load).
    ['busy loading, idle at the deadline', { cpuSeconds: 1.2, ranSeconds: 4.3, busyNow: false, workersSeen: 3, workersNow: 3 }, 'listens on no port'],
    ['accepts but never answers', { onPort: [{ address: '0.0.0.0', reachable: true }] }, 'accepts connections on PORT=40000 but never answered'],
    ['workers gone', { workersSeen: 3, workersNow: 0 }, 'Its workers exited'],
    ['listens on nothing (cluster)', { workersSeen: 2, workersNow: 2 }, 'listens on no port. Does it call app.listen(process.env.PORT) in every worker?'],
    ['listens on nothing (one process)', {}, 'listens on no port. Does it call app.listen(process.env.PORT)?'],
  ])('%s', (_, evidence, words) => {
    expect(explainSilence({ ...base, ...evidence })).toContain(words);
  });

  test('a verifier can word the accepted-but-silent case for its lesson', () => {
    const onPort = [{ address: '0.0.0.0', reachable: true }];
    expect(explainSilence({ ...base, onPort, acceptedButSilent: 'sticky: pauseOnConnect?' })).toBe('sticky: pauseOnConnect?');
  });

  test('a wrong address on PORT wins over a busy CPU; an idle one is not called busy', () => {
    expect(explainSilence({ ...base, onPort: [{ address: '::1', reachable: false }], cpuSeconds: 9, ranSeconds: 10 })).toContain('::1');
    expect(explainSilence({ ...base, cpuSeconds: 0.2, ranSeconds: 10 })).not.toContain('busy');
  });
});

describe('explainExit: why it exited before answering', () => {
  test('exit 0 after its workers died blames the workers, naming how many were seen', () => {
    expect(explainExit({ code: 0, signal: null, workersSeen: 2 })).toContain('Its 2 worker(s) exited first');
    expect(explainExit({ code: 0, signal: null, errorInOutput: true })).toContain('worker(s) exited first');
  });
  test('exit 0 alone says nothing kept it running', () => {
    expect(explainExit({ code: 0, signal: null })).toContain('nothing kept it running');
  });
  test('an error exit or a signal points at the lines', () => {
    expect(explainExit({ code: 1, signal: null, workersSeen: 2 })).toContain('stopped on an error');
    expect(explainExit({ code: null, signal: 'SIGKILL' })).toContain('stopped on an error');
  });
});

describe('load: which requests failed, counted by cause', () => {
  test('no answer or not 200 is a failure; causes are counted', () => {
    const results = [
      { ok: true, status: 200 },
      { ok: true, status: 503 },
      { ok: false, code: 'ECONNREFUSED' },
      { ok: false, code: 'ECONNREFUSED' },
      { ok: false, code: 'ECONNRESET' },
      { ok: false },
    ];
    expect(results.filter(failed)).toHaveLength(5);
    expect(summarizeFailures(results)).toBe('1 status 503, 2 refused, 1 reset, 1 error');
  });
});

describe('the fork watchdog', () => {
  test('one limit for verify, run and bench: the primary, three sets of workers and four more', () => {
    expect(forkLimit(3)).toBe(14);
    expect(forkLimit(0)).toBe(5);
  });

  test('trips just above the limit, kills the program and says so once; at the limit it stays quiet', async () => {
    let count = forkLimit(2);
    let kills = 0;
    let looks = 0;
    const program = {
      exited: false,
      processes: () => {
        looks += 1;
        return Array.from({ length: count });
      },
      killNow: () => kills++,
      lastLines: () => ['forking'],
    };
    const trips = [];
    const stop = watchForks({ program, expectedWorkers: 2 }, (failure) => trips.push(failure), 5);
    try {
      // Ten looks at exactly the limit, none of which trips.
      await until(() => looks >= 10, 'the watchdog looked ten times');
      expect(trips).toEqual([]);
      count += 1;
      await until(() => trips.length === 1, 'the watchdog trips');
      const looksAtTrip = looks;
      // It stopped looking: what it found is said once. (A pause of six
      // ticks, because an absence has no event to wait for.)
      await sleepFor(30);
      expect(looks).toBe(looksAtTrip);
      expect(trips).toHaveLength(1);
      expect(kills).toBe(1);
      expect(trips[0]).toBeInstanceOf(StepFailure);
      expect(trips[0].message).toContain(`started ${count} processes and kept going`);
      expect(trips[0].forkBomb).toEqual({ count, limit: forkLimit(2) });
    } finally {
      stop();
    }
  });
});

describe('waits stop when their signal aborts', () => {
  test('a signal already aborted stops a wait at once, with its reason', async () => {
    const reason = new Error('step ended');
    // A minute-long wait: if it did not stop at once, the test would time out.
    await expect(sleepFor(60000, AbortSignal.abort(reason))).rejects.toBe(reason);
    let calls = 0;
    await expect(pollUntil(() => ++calls, { timeoutMs: 60000, signal: AbortSignal.abort(reason) })).rejects.toBe(reason);
    expect(calls).toBe(0);
  });

  test('an abort during a wait ends it with the reason; a poll ends at its deadline with the last value', async () => {
    const controller = new AbortController();
    const waiting = sleepFor(60000, controller.signal);
    const reason = new StepFailure('interrupted');
    controller.abort(reason);
    await expect(waiting).rejects.toBe(reason);

    let n = 0;
    const r = await pollUntil(() => (++n, null), { timeoutMs: 50, intervalMs: 10 });
    expect(r.ok).toBe(false);
    expect(r.value).toBeNull();
    expect(n).toBeGreaterThan(1);
    expect(await pollUntil(() => 'yes', { timeoutMs: 50 })).toMatchObject({ ok: true, value: 'yes' });
    // Deadlines computed from performance.now() are fractional.
    expect(await pollUntil(() => null, { timeoutMs: 30.7, intervalMs: 7.3 })).toMatchObject({ ok: false });
    await sleepFor(1.5, new AbortController().signal);
  });
});

describe('shell lines in failure messages', () => {
  test('curl lines quote URLs the shell would read (zsh globs on ?), and leave plain ones alone', () => {
    expect(curlFor({ method: 'GET', url: 'http://127.0.0.1:4000/heavy?ms=300' })).toBe("curl -s 'http://127.0.0.1:4000/heavy?ms=300'");
    expect(curlFor({ method: 'GET', url: 'http://127.0.0.1:4000/' })).toBe('curl -s http://127.0.0.1:4000/');
    expect(curlFor({ method: 'POST', url: 'http://127.0.0.1:4000/config', body: `{"a":"it's"}` })).toBe(
      `curl -s -X POST -H 'content-type: application/json' -d '{"a":"it'\\''s"}' http://127.0.0.1:4000/config`,
    );
  });

  test('formatFailure starts the program first unless the reproduction already does', () => {
    const f = new StepFailure('GET / failed.', { expected: 'a', actual: 'b', reproduce: ['curl -s http://x/'] });
    expect(formatFailure(f, { commandLine: 'PORT=1 node server.js' })).toContain('to see it yourself:\n    PORT=1 node server.js &\n    curl -s \'http://x/\'');
    const g = new StepFailure('no.', { reproduce: ['PORT=1 node server.js   # then'] });
    expect(formatFailure(g, { commandLine: 'PORT=1 node server.js' })).not.toContain('node server.js &');
  });
});

describe('the solution diff shown after a pass', () => {
  const plain = { green: (s) => s, dim: (s) => s, bold: (s) => s };

  test('todosOf joins continuation comment lines and ignores other comments', () => {
    const starter = ['// header', '// TODO: fork WORKERS workers', '//   and replace them', 'const x = 1;', '  // TODO listen on PORT', 'app.listen();', '// not a todo'].join('\n');
    expect(todosOf(starter)).toEqual(['fork WORKERS workers and replace them', 'listen on PORT']);
  });

  test('addedLines marks exactly the lines the solution adds (indentation does not count)', () => {
    const starter = ['a', 'b', 'c'];
    const solution = ['a', '  b', 'x', 'c', 'y'];
    expect(addedLines(starter, solution)).toEqual([false, false, true, false, true]);
    expect(addedLines([], ['a'])).toEqual([true]);
    expect(addedLines(['a'], [])).toEqual([]);
  });

  test('markedSolution numbers every line of a short file and marks the added ones', () => {
    expect(markedSolution('a\nc\n', 'a\nb\nc\n', plain)).toBe('1   a\n2 + b\n3   c');
  });

  test('a long file shows only the changed parts with three lines of context', () => {
    const starter = Array.from({ length: 100 }, (_, i) => `line ${i}`);
    const solution = [...starter.slice(0, 50), 'added', ...starter.slice(50)];
    const shown = markedSolution(starter.join('\n'), solution.join('\n'), plain).split('\n');
    // Its line numbers say where the shown part starts; a gap after it is marked "...".
    expect(shown).toEqual([' 48   line 47', ' 49   line 48', ' 50   line 49', ' 51 + added', ' 52   line 50', ' 53   line 51', ' 54   line 52', '      ...']);
  });
});
