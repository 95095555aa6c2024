// `bench`, run as a real CLI: --compare loads a single-process server and a
// clustered one in turn and prints them side by side (table, chart, the
// explanation about cores), with no failed request from correct programs
// and no process left; a route the program lacks and a missing bottleneck
// file are explained.
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { readFileSync } from 'node:fs';
import { findLesson, loadLessons, PACKAGE_ROOT } from '../lib/manifest.js';
import { markedProcesses } from '../lib/harness/processes.js';
import { runCli } from './helpers/cli.js';


const benchIn = (args, cwd) => runCli(args, { cwd, env: { NO_COLOR: '1' } });

const leftBy = (pid) => markedProcesses().filter((p) => Number(p.mark.split(':')[0]) === pid);

test('--compare: one process against the cluster, side by side, with a chart and the explanation', async () => {
  const single = findLesson('bottleneck').paths.solution;
  const clustered = findLesson('respawn').paths.solution;
  const r = await benchIn(['bench', clustered, '--compare', '--baseline', single, '--lesson', 'respawn', '--duration', '1', '--connections', '4'], tmpdir());
  expect(r.code).toBe(0);
  // Progress while it runs, then one table row per program: WORKERS, req/s, p50, p90, p99, max, errors.
  expect(r.out).toMatch(/yours, bottleneck: \[[#.]+\]/);
  const row = (label) => new RegExp(`^  ${label}\\s+(\\S+)\\s+(\\d+)\\s+\\d+ ms\\s+\\d+ ms\\s+\\d+ ms\\s+\\d+ ms\\s+(\\d+)$`, 'm').exec(r.out);
  const one = row('yours, bottleneck');
  const many = row('yours, clustered');
  expect(one).not.toBeNull();
  expect(many).not.toBeNull();
  expect([one[1], many[1]]).toEqual(['-', '3']);
  expect(Number(one[2])).toBeGreaterThan(0);
  expect(Number(many[2])).toBeGreaterThan(0);
  expect([one[3], many[3]]).toEqual(['0', '0']); // correct programs fail no request
  expect(r.out).toMatch(/yours, clustered\s+│[^│]+│ peak \d+\/s/);
  expect(r.out).toMatch(/with WORKERS=3 did \d+\.\dx yours, bottleneck/);
  expect(r.out).toMatch(/This machine has \d+ cores?|more than \d+ cores? can give/);
  expect(leftBy(r.pid)).toEqual([]);
});

test('explains a route the program does not have, and a --compare with no bottleneck server', async () => {
  const clustered = findLesson('fork').paths.solution;
  const missing = await benchIn(['bench', clustered, '--path', '/nope', '--duration', '1'], tmpdir());
  expect(missing.code).toBe(1);
  expect(missing.out).toMatch(/GET \/nope did not answer 200/);
  expect(missing.out).toMatch(/--path/);
  expect(leftBy(missing.pid)).toEqual([]);

  const empty = mkdtempSync(join(tmpdir(), 'cw-bench-'));
  const usage = await benchIn(['bench', clustered, '--compare'], empty);
  expect(usage.code).toBe(2);
  expect(usage.out).toMatch(/--compare needs your bottleneck server.*--baseline/);
});

test('each lesson is benched on its manifest route; --compare from a lesson without /heavy compares on GET / and says so', async () => {
  const single = findLesson('bottleneck').paths.solution;
  const graceful = findLesson('graceful-shutdown');
  expect(graceful.bench).toEqual({ route: '/slow?ms=20' });
  const r = await benchIn(['bench', graceful.paths.solution, '--compare', '--baseline', single, '--lesson', 'graceful-shutdown', '--duration', '1', '--connections', '4'], tmpdir());
  expect(r.code).toBe(0);
  expect(r.out).toMatch(/Benchmark: GET \/, /);
  expect(r.out).toMatch(/Comparing "yours, bottleneck" and "yours, clustered", on GET \/: lesson \d+ \(graceful-shutdown\) has GET \/slow and your bottleneck server has GET \/heavy/);
  expect(r.out).not.toMatch(/did not answer 200/);
  expect(leftBy(r.pid)).toEqual([]);

  const alone = await benchIn(['bench', graceful.paths.solution, '--lesson', 'graceful-shutdown', '--duration', '1', '--connections', '4'], tmpdir());
  expect(alone.code).toBe(0);
  expect(alone.out).toMatch(/Benchmark: GET \/slow\?ms=20, /);
  expect(leftBy(alone.pid)).toEqual([]);

  // A lesson with nothing worth benching alone (sticky sessions: one client address reaches one worker).
  expect(findLesson('sticky-sessions').bench).toBeNull();
  const none = await benchIn(['bench', findLesson('sticky-sessions').paths.solution, '--lesson', 'sticky-sessions'], tmpdir());
  expect(none.code).toBe(2);
  expect(none.out).toMatch(/has no route worth benching on its own\. Name one with --path/);
});

test("every lesson's bench route is one its starter and its reference solution both have; its packages are the package's dependencies", () => {
  const { dependencies } = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8'));
  for (const lesson of loadLessons()) {
    expect({ lesson: lesson.id, bench: lesson.bench === null || typeof lesson.bench?.route === 'string' }).toEqual({ lesson: lesson.id, bench: true });
    expect({ lesson: lesson.id, packages: lesson.packages.filter((p) => !(p in dependencies)) }).toEqual({ lesson: lesson.id, packages: [] });
    if (!lesson.bench) continue;
    const route = lesson.bench.route.split('?')[0];
    for (const file of [lesson.paths.exercise, lesson.paths.solution]) {
      expect({ file, route, has: readFileSync(file, 'utf8').includes(`'${route}'`) }).toEqual({ file, route, has: true });
    }
  }
});

