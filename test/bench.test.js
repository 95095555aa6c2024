// `bench`, run as a real CLI: --compare loads a single-process server and a
// clustered one in turn and prints them side by side (table, chart, the
// explanation about cores), with no failed request from correct programs
// and no process left; a route the program lacks and a missing lesson-1
// file are explained.
import { spawn } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { findLesson } from '../lib/manifest.js';
import { markedProcesses } from '../lib/harness/processes.js';

const CLI = new URL('../bin/cluster-workshop.js', import.meta.url).pathname;

function runCli(args, cwd) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, [CLI, ...args], { cwd, env: { ...process.env, NO_COLOR: '1' }, stdio: ['ignore', 'pipe', 'pipe'] });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    child.on('exit', (code) => resolve({ code, out, pid: child.pid }));
  });
}

const leftBy = (pid) => markedProcesses().filter((p) => Number(p.mark.split(':')[0]) === pid);

test('--compare: one process against the cluster, side by side, with a chart and the explanation', async () => {
  const single = findLesson('bottleneck').paths.solution;
  const clustered = findLesson('respawn').paths.solution;
  const r = await runCli(['bench', clustered, '--compare', '--baseline', single, '--lesson', 'respawn', '--duration', '1', '--connections', '4'], tmpdir());
  expect(r.code).toBe(0);
  // Progress while it runs, then one table row per program: WORKERS, req/s, p50, p90, p99, max, errors.
  expect(r.out).toMatch(/yours, lesson 1: \[[#.]+\]/);
  const row = (label) => new RegExp(`^  ${label}\\s+(\\S+)\\s+(\\d+)\\s+\\d+ ms\\s+\\d+ ms\\s+\\d+ ms\\s+\\d+ ms\\s+(\\d+)$`, 'm').exec(r.out);
  const one = row('yours, lesson 1');
  const many = row('yours, clustered');
  expect(one).not.toBeNull();
  expect(many).not.toBeNull();
  expect([one[1], many[1]]).toEqual(['-', '3']);
  expect(Number(one[2])).toBeGreaterThan(0);
  expect(Number(many[2])).toBeGreaterThan(0);
  expect([one[3], many[3]]).toEqual(['0', '0']); // correct programs fail no request
  expect(r.out).toMatch(/yours, clustered\s+│[^│]+│ peak \d+\/s/);
  expect(r.out).toMatch(/with WORKERS=3 did \d+\.\dx yours, lesson 1/);
  expect(r.out).toMatch(/This machine has \d+ cores?|more than \d+ cores? can give/);
  expect(leftBy(r.pid)).toEqual([]);
});

test('explains a route the program does not have, and a --compare with no lesson-1 server', async () => {
  const clustered = findLesson('fork').paths.solution;
  const missing = await runCli(['bench', clustered, '--path', '/nope', '--duration', '1'], tmpdir());
  expect(missing.code).toBe(1);
  expect(missing.out).toMatch(/GET \/nope did not answer 200/);
  expect(missing.out).toMatch(/--path/);
  expect(leftBy(missing.pid)).toEqual([]);

  const empty = mkdtempSync(join(tmpdir(), 'cw-bench-'));
  const usage = await runCli(['bench', clustered, '--compare'], empty);
  expect(usage.code).toBe(2);
  expect(usage.out).toMatch(/--compare needs your lesson-1 server.*--baseline/);
});
