#!/usr/bin/env node
// npm run bench [-- --runs N] [-- --lessons fork,respawn]
// Times `cluster-workshop verify` of every lesson's reference solution (wall
// time of the whole command, as a learner waits for it) and the CLI's quick
// commands, and prints median and worst against the targets.
import { spawnSync } from 'node:child_process';
import { parseArgs } from 'node:util';
import { fileURLToPath } from 'node:url';
import { rmSync } from 'node:fs';
import { dirname } from 'node:path';
import { loadLessons } from '../lib/manifest.js';
import { copyIntoPm2Workspace, lessonNeedsPm2, pm2Dir } from '../test/helpers/pm2.js';

const CLI = fileURLToPath(new URL('../bin/cluster-workshop.js', import.meta.url));
// Median targets in ms from the issues, on a 2-core machine, by lesson id.
// The lessons themselves come from the manifest: a lesson added there is
// timed with DEFAULT_TARGET_MS (and said so) until it gets its own target.
const DEFAULT_TARGET_MS = 3000;
const TARGETS = {
  bottleneck: 3000,
  fork: 1500,
  respawn: 1500,
  broadcast: 1500,
  'graceful-shutdown': 3000,
  'rolling-restart': 4000,
  'shared-state': 1500,
  'redis-state': 3000,
  'sticky-sessions': 1500,
  'health-check': 3000,
  capstone: 25000,
  // Lessons of later issues, which give no figure: what their verifier must
  // wait for on a quiet machine, with room. worker-threads: two rounds of
  // 2 x THREADS /heavy?ms=300 and a burst; containers: four starts (PID 1,
  // taskset) and a drain; process-manager: PM2 starts instances one after
  // another (wait_ready, STARTUP_MS=2000 each), reloads, a memory limit
  // checked every second and a crash loop with growing pauses;
  // beyond-one-machine: three starts, nginx, four rounds of traffic.
  'worker-threads': 8000,
  containers: 5000,
  'process-manager': 45000,
  'beyond-one-machine': 25000,
};

const { values } = parseArgs({
  options: { runs: { type: 'string', default: '5' }, lessons: { type: 'string' }, 'cli-runs': { type: 'string', default: '20' } },
});
const runs = Number(values.runs);
const only = values.lessons?.split(',');
const lessons = loadLessons();
const stale = Object.keys(TARGETS).filter((id) => !lessons.some((l) => l.id === id));
if (stale.length) {
  console.error(`scripts/bench.js has targets for lessons the manifest does not list: ${stale.join(', ')}. Rename or remove them.`);
  process.exit(2);
}

function timeCommand(args) {
  const started = performance.now();
  const r = spawnSync(process.execPath, [CLI, ...args], { encoding: 'utf8', env: { ...process.env, NO_COLOR: '1' } });
  return { ms: performance.now() - started, status: r.status, output: r.stdout + r.stderr };
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2;
};

const rows = [];
const row = (name, times, target, failures = 0) => {
  const med = median(times);
  rows.push({
    what: name,
    runs: times.length,
    'median ms': Math.round(med),
    'worst ms': Math.round(Math.max(...times)),
    'target ms': target ?? '',
    ok: target === undefined ? '' : med <= target && failures === 0 ? 'yes' : 'NO',
    failures,
  });
};

for (const args of [['list'], ['--help'], []]) {
  const times = [];
  for (let i = 0; i < Number(values['cli-runs']); i++) times.push(timeCommand(args).ms);
  row(`cluster-workshop ${args.join(' ') || '(no command, no terminal)'}`, times, 100);
}
{
  const times = [];
  for (let i = 0; i < Number(values['cli-runs']); i++) {
    const started = performance.now();
    spawnSync(process.execPath, ['-e', '0']);
    times.push(performance.now() - started);
  }
  row('node -e 0 (for reference)', times);
}

for (const lesson of lessons) {
  if (only && !only.includes(lesson.id)) continue;
  if (!(lesson.id in TARGETS)) process.stderr.write(`${lesson.id} has no target of its own here: timed against ${DEFAULT_TARGET_MS} ms\n`);
  // PM2 is not a dependency (AGPL-3.0): its lesson runs from a workspace
  // with the PM2 the tests use, as a learner's would after npm install pm2.
  let solution = lesson.paths.solution;
  if (lessonNeedsPm2(lesson)) {
    try {
      pm2Dir();
    } catch (err) {
      process.stderr.write(`skipped ${lesson.id}: ${err.message}\n`);
      continue;
    }
    solution = copyIntoPm2Workspace(dirname(solution), lesson.id);
  }
  const times = [];
  let failures = 0;
  for (let i = 0; i < runs; i++) {
    const r = timeCommand(['verify', lesson.id, solution]);
    times.push(r.ms);
    if (r.status !== 0) {
      failures += 1;
      process.stderr.write(`verify ${lesson.id} failed (exit ${r.status}):\n${r.output.split('\n').slice(-25).join('\n')}\n`);
    }
  }
  row(`verify ${lesson.number} ${lesson.id}`, times, TARGETS[lesson.id] ?? DEFAULT_TARGET_MS, failures);
  if (solution !== lesson.paths.solution) rmSync(dirname(dirname(solution)), { recursive: true, force: true });
  process.stderr.write(`measured ${lesson.id}\n`);
}

console.table(rows);
