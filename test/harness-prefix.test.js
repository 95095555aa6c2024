// ctx.start(env, { prefix }): the containers lesson's one way to run the
// learner's program under a command (unshare for a PID namespace, taskset for
// a CPU set). The program is still one process group the harness owns: after
// a pass, a failure and a step timeout, nothing of it is left, even a primary
// and workers that ignore SIGTERM, and even though the primary is PID 1 of a
// namespace (which drops signals it has no handler for).
import { readFileSync } from 'node:fs';
import { runVerifier } from '../lib/harness/runner.js';
import { isolationSupport, isolationPrefix, allowedCpus } from '../lib/harness/isolation.js';
import { isAlive } from '../lib/harness/processes.js';

const FILE = new URL('./fixtures/harness/ignores-sigterm.js', import.meta.url).pathname;
const supported = isolationSupport().pidNamespace.ok && isolationSupport().taskset.ok;
const cpu = allowedCpus()[0];

function status(pid) {
  return readFileSync(`/proc/${pid}/status`, 'utf8');
}

/** A verifier whose one step starts the program under the prefix, records its pids, then ends as `outcome` says. */
function verifierThat(outcome, seen) {
  return {
    env: { WORKERS: '2' },
    steps: [
      {
        id: 'prefixed',
        title: 'runs under unshare and taskset',
        timeoutMs: 8000,
        async run(ctx) {
          await ctx.start({}, { prefix: isolationPrefix({ pid1: true, cpus: [cpu] }) });
          const workers = await ctx.waitForWorkers(2, { timeoutMs: 5000 });
          seen.leader = ctx.program.leaderPid;
          seen.primary = ctx.primaryPid;
          seen.workers = workers.value;
          seen.nsPid = status(ctx.primaryPid).match(/^NSpid:\s*(.+)$/m)[1].trim().split(/\s+/).at(-1);
          seen.cpus = status(workers.value[0]).match(/^Cpus_allowed_list:\s*(.+)$/m)[1];
          seen.answer = ctx.program.hostPidOf((await ctx.request('/')).pid);
          if (outcome === 'fail') ctx.fail('failed on purpose');
          if (outcome === 'timeout') await new Promise(() => {});
        },
      },
    ],
  };
}

(supported ? describe : describe.skip)('a prefixed start (unshare, taskset)', () => {
  test.each(['pass', 'fail', 'timeout'])('after a %s, no process of the program is left', async (outcome) => {
    const seen = {};
    const report = await runVerifier({ lesson: { id: 'prefix-test' }, file: FILE, verifier: verifierThat(outcome, seen) });
    expect(report.steps.map((s) => s.passed)).toEqual([true, outcome === 'pass']);
    if (outcome === 'timeout') expect(report.steps[1].detail).toMatch(/did not finish within 8 s/);
    // The prefix did what it is for: the primary is PID 1 of its namespace, not the leader, on one CPU.
    expect(seen.nsPid).toBe('1');
    expect(seen.primary).not.toBe(seen.leader);
    expect(seen.cpus).toBe(String(cpu));
    // The answer's pid is the worker's in the namespace; hostPidOf gives it back as this machine's.
    expect(seen.workers).toContain(seen.answer);
    for (const pid of [seen.leader, seen.primary, ...seen.workers]) expect(isAlive(pid)).toBe(false);
  }, 30000);
});
