// A port taken between the verifier choosing it and the learner's listen is
// not the learner's fault: the harness notices that a stranger holds PORT
// (even one that answers HTTP with a pid) and starts the program again on
// another port, a few times at most. The program used here listens only
// when it gets SIGUSR2, so the test takes the port in between, every time.
import http from 'node:http';
import { join } from 'node:path';
import { runVerifier } from '../lib/harness/runner.js';
import { TextReporter } from '../lib/cli/reporter.js';
import { leftovers, verdictOf, PASSED } from './helpers/verify.js';

const FILE = join(new URL('./fixtures/harness/', import.meta.url).pathname, 'listens-on-signal.js');
const lesson = { id: 'harness', number: 0, title: 'harness test' };

/**
 * Runs the verifier; on each start of the program, takeThisStart(n) says
 * whether a stranger takes the port first. Returns the report, the log and
 * the ports the program was started on.
 */
async function verifyWithStranger(takeThisStart) {
  const strangers = [];
  const ports = [];
  let log = '';
  const reporter = new TextReporter({ write: (s) => (log += s) });
  const relay = reporter.programLine.bind(reporter);
  reporter.programLine = (stream, line) => {
    relay(stream, line);
    const m = /^booting pid=(\d+) port=(\d+)/.exec(line);
    if (!m) return;
    const [pid, port] = [Number(m[1]), Number(m[2])];
    ports.push(port);
    if (!takeThisStart(ports.length)) {
      process.kill(pid, 'SIGUSR2');
      return;
    }
    // The nasty stranger: an HTTP server that answers JSON with a pid.
    const stranger = http.createServer((req, res) => res.end(JSON.stringify({ pid: process.pid })));
    strangers.push(stranger);
    stranger.listen(port, () => process.kill(pid, 'SIGUSR2'));
  };
  try {
    const report = await runVerifier({ lesson, file: FILE, verifier: { clustered: false, steps: [] }, reporter, readyTimeoutMs: 8000 });
    return { report, log, ports };
  } finally {
    await Promise.all(strangers.map((s) => new Promise((r) => s.close(r))));
  }
}

test('a port taken before the program listens is detected and the program started again on another port', async () => {
  const { report, log, ports } = await verifyWithStranger((n) => n === 1);
  expect(verdictOf({ report, log })).toMatch(PASSED);
  expect(ports.length).toBe(2);
  expect(ports[1]).not.toBe(ports[0]);
  expect(log).toContain(`port ${ports[0]} was taken by another program`);
  // The stranger's answer (its pid is this test's) was not taken for the program's.
  expect(log).not.toContain(`"pid":${process.pid}`);
  expect(leftovers()).toEqual([]);
});

test('a port taken every time fails after a few tries, saying it is not the program', async () => {
  const { report, ports } = await verifyWithStranger(() => true);
  const failed = report.steps.find((s) => !s.passed);
  expect(failed.id).toBe('starts');
  expect(failed.detail).toContain('Another program took the port the verifier chose, 3 times in a row');
  expect(ports.length).toBe(3);
  expect(new Set(ports).size).toBe(3);
  expect(leftovers()).toEqual([]);
});
