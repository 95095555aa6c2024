// `bench`: requests per second and latency of the learner's program under
// autocannon, alone, against their bottleneck server (--compare), or against
// the reference solutions (--reference), side by side with a chart, and
// what the figures mean on a machine with C cores. One program runs at a
// time: the machine's cores are the thing being measured.
import { availableParallelism } from 'node:os';
import { existsSync } from 'node:fs';
import { resolve } from 'node:path';
import { lessonFrom, fileFrom } from '../lesson-arg.js';
import { findLesson, loadVerifier } from '../../manifest.js';
import { Progress, workspaceDir } from '../../progress.js';
import { StepFailure, formatFailure } from '../../harness/failure.js';
import { launch, lessonEnvOf } from '../../harness/launch.js';
import { colorEnabled, makeStyle } from '../style.js';
import { onInterrupt } from '../interrupt.js';
import { EXIT, UsageError, exitCodeForSignal } from '../errors.js';
import { sparkChart } from '../live/chart.js';

const BUCKET_MS = 250;

export const options = {
  compare: { type: 'boolean' },
  reference: { type: 'boolean' },
  baseline: { type: 'string' },
  lesson: { type: 'string' },
  path: { type: 'string' },
  duration: { type: 'string' },
  connections: { type: 'string' },
  workers: { type: 'string' },
  dir: { type: 'string' },
};
export const usage = `Usage: cluster-workshop bench [file] [--compare] [--reference] [options]

Loads your program with autocannon (fresh figures, one program at a time) and
shows requests per second, latency percentiles and errors side by side, with a
chart of requests per second over the run.

  file            your clustered program; default: your current lesson's file
  --compare       also your bottleneck server (one process), to see what the cluster buys
  --baseline <f>  the single-process server for --compare (default: the bottleneck lesson's file in your workspace)
  --reference     also the reference solutions of the same lessons
  --lesson <l>    whose environment to start it with (default: your current lesson, else 2)
  --workers <n>   WORKERS for clustered programs (default: the lesson's, as verify uses)
  --path <p>      the route to load (default: the lesson's bench route, such as /heavy?ms=20;
                  with --compare, one both programs have)
  --duration <s>  seconds per program (default: 5)
  --connections <n>  concurrent connections (default: 8)

Exit code: 0 when every program ran, 1 when one failed to start or answer, 2 usage error.`;

export async function run(values, [file], io) {
  const where = { dir: values.dir, env: io.env, cwd: io.cwd, tell: io.out };
  const style = makeStyle(colorEnabled(io.stdout, io.env));
  const { lesson, single, targets } = await chooseTargets(values, file, where);
  const route = benchRoute(values, lesson, single);
  const settings = {
    path: route.path,
    durationS: number(values.duration, 5, '--duration', { min: 1, max: 120 }),
    connections: number(values.connections, 8, '--connections', { min: 1, max: 200, integer: true }),
    workers: values.workers === undefined ? undefined : number(values.workers, 0, '--workers', { min: 1, max: 64, integer: true }),
  };
  if (!settings.path.startsWith('/')) throw new UsageError(`--path is a route such as /heavy?ms=20, starting with "/", not "${settings.path}".`);

  const cores = availableParallelism();
  io.out(style.bold(`Benchmark: GET ${settings.path}, ${settings.connections} connections, ${settings.durationS} s per program, ${cores} cores\n`));
  if (values.compare) io.out(`Comparing ${targets.map((t) => `"${t.label}"`).join(' and ')}, on GET ${settings.path}: ${route.why}.\n`);

  const controller = new AbortController();
  const release = onInterrupt((signal) => controller.abort(signal));
  const results = [];
  try {
    for (const target of targets) {
      if (controller.signal.aborted) break;
      const result = await benchOne(target, settings, { io, style, signal: controller.signal });
      if (result.failure) {
        io.out(`${style.red(`${target.label}: ${formatFailure(result.failure)}`)}\n`);
        return EXIT.failed;
      }
      results.push(result);
    }
  } finally {
    release();
  }
  if (controller.signal.aborted) {
    io.out(style.yellow(`Interrupted (${controller.signal.reason}); every program was stopped.\n`));
    return exitCodeForSignal(controller.signal.reason);
  }
  io.out(`\n${table(results)}\n\n`);
  io.out(style.bold('requests per second over the run (same scale)\n'));
  for (const line of sparkChart(results.map((r) => ({ label: r.label, values: r.series })), { width: Math.min(50, (io.stdout?.columns || 80) - 40), ascii: io.env.CLUSTER_WORKSHOP_ASCII !== undefined })) io.out(`  ${line}\n`);
  io.out(`\n${explain(results, settings, cores)}\n`);
  return EXIT.ok;
}

async function chooseTargets(values, file, where) {
  const progress = Progress.load(workspaceDir(values.dir, where.env, where.cwd));
  const lesson = values.lesson !== undefined ? lessonFrom(values.lesson, where) : (progress.current && findLesson(progress.current)) || findLesson(2);
  const single = findLesson(1);
  const targets = [];
  const add = async (label, path, forLesson, kind) => {
    const verifier = await loadVerifier(forLesson);
    targets.push({ label, file: path, verifier, packages: forLesson.packages, kind, clustered: verifier.clustered !== false });
  };
  if (values.compare) {
    const baseline = values.baseline !== undefined ? existing(resolve(where.cwd, values.baseline), '--baseline') : workspaceFile(single, where, '--compare needs your bottleneck server: start the bottleneck lesson in your workspace, or give it with --baseline <file>.');
    await add(`yours, ${single.id}`, baseline, single, 'yours');
  }
  let mine = null;
  if (file !== undefined) mine = fileFrom(lesson, file, { ...where, command: 'bench' });
  else if (!values.reference || values.compare) mine = workspaceFile(lesson, where, `No file given and no lesson ${lesson.number} file in your workspace. Name your program: cluster-workshop bench <file>.`);
  else mine = tryWorkspaceFile(lesson, where);
  if (mine) await add(values.compare ? 'yours, clustered' : `yours (lesson ${lesson.number})`, mine, lesson, 'yours');
  if (values.reference) {
    if (values.compare || !mine) await add(`reference, ${single.id}`, single.paths.solution, single, 'reference');
    if (lesson.number !== 1 || !values.compare) await add(`reference, lesson ${lesson.number}`, lesson.paths.solution, lesson, 'reference');
  }
  return { lesson, single, targets };
}

/**
 * The route to load and why that one: --path, else the lesson's bench route
 * from its manifest entry. --compare needs a route both programs have: the
 * lesson's, when the bottleneck lesson has the same one (/heavy), else GET /, which every
 * lesson's program answers.
 */
export function benchRoute(values, lesson, single) {
  if (values.path !== undefined) return { path: values.path, why: 'the route you gave with --path' };
  const mine = lesson.bench?.route;
  if (values.compare) {
    const base = single.bench?.route;
    if (mine && base && pathOf(mine) === pathOf(base)) {
      return { path: mine, why: `the bench route of lesson ${lesson.number} (${lesson.id}) and of lesson ${single.number}, a CPU-bound request` };
    }
    return {
      path: '/',
      why:
        `lesson ${lesson.number} (${lesson.id}) has ${mine ? `GET ${pathOf(mine)}` : 'no bench route'} and your ${single.id} server has ${base ? `GET ${pathOf(base)}` : 'none'}, ` +
        'so they are compared on GET /, which both answer; it does almost no work, so this measures the cost of a request through each, not how CPU-bound work scales',
    };
  }
  if (!mine) {
    throw new UsageError(`Lesson ${lesson.number} (${lesson.id}) has no route worth benching on its own. Name one with --path, or compare with --compare.`);
  }
  return { path: mine, why: `the bench route of lesson ${lesson.number} (${lesson.id})` };
}

const pathOf = (route) => route.split('?')[0];

function workspaceFile(lesson, where, message) {
  const path = tryWorkspaceFile(lesson, where);
  if (!path) throw new UsageError(message);
  return path;
}

function tryWorkspaceFile(lesson, where) {
  try {
    return fileFrom(lesson, undefined, where);
  } catch {
    return null;
  }
}

function existing(path, flag) {
  if (!existsSync(path)) throw new UsageError(`${flag}: there is no file at ${path}.`);
  return path;
}

function number(text, fallback, flag, { min, max, integer = false }) {
  if (text === undefined) return fallback;
  const n = Number(text);
  if (!Number.isFinite(n) || n < min || n > max || (integer && !Number.isInteger(n))) {
    throw new UsageError(`${flag} takes ${integer ? 'a whole number' : 'a number'} from ${min} to ${max}, not "${text}".`);
  }
  return n;
}

/** Starts one program, checks the route, loads it, stops it. */
/** Starts one program (the harness's launch path, as verify does), checks the route, loads it, stops it. */
async function benchOne(target, settings, { io, style, signal }) {
  const env = lessonEnvOf(target.verifier);
  if (target.clustered && settings.workers !== undefined) env.WORKERS = String(settings.workers);
  const lines = [];
  const launched = launch({
    file: target.file,
    verifier: target.verifier,
    packages: target.packages,
    env,
    signal,
    onLine: (s, l) => lines.push(l),
    log: (message) => message.startsWith('$ ') && io.out(`${style.cyan(target.label)}: ${style.dim(message.slice(2))}\n`),
  });
  let bombed = null;
  launched.forkBomb.then((failure) => (bombed = failure));
  const { ctx } = launched;
  try {
    let program;
    try {
      program = await launched.ready;
    } catch (err) {
      if (signal.aborted) return { aborted: true };
      if (err instanceof StepFailure) return { failure: err };
      throw err;
    }
    const probe = await ctx.request(settings.path, { timeoutMs: 10000 });
    if (!probe.ok || probe.status !== 200) {
      return {
        failure: new StepFailure(`GET ${settings.path} did not answer 200, so there is nothing to measure.`, {
          actual: probe.ok ? `status ${probe.status}` : probe.error,
          hint: probe.status === 404 ? `add the route, or pick one your program has with --path.` : undefined,
          outputLines: program.lastLines(8),
        }),
      };
    }
    const measured = await load(program.port, settings, { io, style, label: target.label, signal });
    if (bombed) return { failure: bombed };
    return { ...target, ...measured, workers: ctx.expectedWorkers, env };
  } finally {
    await launched.stop();
  }
}

async function load(port, { path, durationS, connections }, { io, style, label, signal }) {
  const { default: autocannon } = await import('autocannon');
  const buckets = [];
  const started = performance.now();
  const tty = Boolean(io.stdout?.isTTY);
  let lastShown = 0;
  const result = await new Promise((resolvePromise, reject) => {
    const instance = autocannon(
      { url: `http://127.0.0.1:${port}${path}`, connections, duration: durationS + 10, timeout: 10 },
      (err, res) => (err ? reject(err) : resolvePromise(res)),
    );
    instance.on('response', (client, status) => {
      const i = Math.floor((performance.now() - started) / BUCKET_MS);
      buckets[i] = (buckets[i] ?? 0) + 1;
    });
    // Progress: a redrawn line on a terminal, a line a second otherwise.
    const progress = setInterval(() => {
      const elapsed = (performance.now() - started) / 1000;
      const second = Math.floor(elapsed);
      const recent = buckets.slice(-4).reduce((a, b) => a + (b ?? 0), 0);
      const text = `  ${label}: ${bar(elapsed / durationS)} ${elapsed.toFixed(1)}/${durationS} s, ${recent} req/s`;
      if (tty) io.out(`\r${text}\x1b[K`);
      else if (second > lastShown) {
        lastShown = second;
        io.out(`${text}\n`);
      }
    }, 250);
    const stop = () => instance.stop();
    const timer = setTimeout(stop, durationS * 1000);
    signal.addEventListener('abort', stop, { once: true });
    instance.on('done', () => {
      clearInterval(progress);
      clearTimeout(timer);
      signal.removeEventListener('abort', stop);
    });
  });
  if (tty) io.out(`\r\x1b[K`);
  const seconds = (performance.now() - started) / 1000;
  const full = Math.floor((durationS * 1000) / BUCKET_MS);
  const series = Array.from({ length: full }, (_, i) => ((buckets[i] ?? 0) * 1000) / BUCKET_MS);
  const errors = result.errors + result.timeouts;
  const summary = {
    rps: Math.round(result.requests.total / seconds),
    requests: result.requests.total,
    errors,
    non2xx: result.non2xx,
    p50: result.latency.p50,
    p90: result.latency.p90,
    p99: result.latency.p99,
    max: result.latency.max,
    series,
  };
  io.out(`  ${label}: ${style.bold(`${summary.rps} req/s`)}, p50 ${summary.p50} ms, p99 ${summary.p99} ms, ${errors + summary.non2xx} errors\n`);
  return summary;
}

function bar(fraction, width = 20) {
  const filled = Math.max(0, Math.min(width, Math.round(fraction * width)));
  return `[${'#'.repeat(filled)}${'.'.repeat(width - filled)}]`;
}

function table(results) {
  const rows = [
    ['', 'WORKERS', 'req/s', 'p50', 'p90', 'p99', 'max', 'errors'],
    ...results.map((r) => [
      r.label,
      r.clustered ? String(r.workers) : '-',
      String(r.rps),
      `${r.p50} ms`,
      `${r.p90} ms`,
      `${r.p99} ms`,
      `${r.max} ms`,
      String(r.errors + r.non2xx),
    ]),
  ];
  const widths = rows[0].map((_, c) => Math.max(...rows.map((row) => row[c].length)));
  return rows.map((row) => `  ${row.map((cell, c) => (c === 0 ? cell.padEnd(widths[c]) : cell.padStart(widths[c]))).join('  ')}`).join('\n');
}

/** What the figures mean: CPU-bound work scales with cores, waiting scales with workers. */
export function explain(results, { path }, cores) {
  const lines = [];
  const single = results.find((r) => !r.clustered);
  const clustered = results.filter((r) => r.clustered);
  const cpuBound = /\/heavy/.test(path);
  const ms = Number(/[?&]ms=(\d+)/.exec(path)?.[1]);
  if (single && cpuBound && ms > 0) {
    lines.push(`One process serves one ${path} at a time: at most about ${Math.round(1000 / ms)} req/s (1000 ms / ${ms} ms); ${single.label} did ${single.rps}.`);
  }
  let beyondCores = false;
  for (const c of clustered) {
    if (!single || single.rps <= 0) continue;
    const ratio = c.rps / single.rps;
    beyondCores ||= ratio > cores * 1.15;
    lines.push(`${c.label} with WORKERS=${c.workers} did ${ratio.toFixed(1)}x ${single.label}.`);
  }
  if (cpuBound && beyondCores) {
    lines.push(
      `That is more than ${cores} cores can give: /heavy?ms=N runs for N ms of clock time, not for a fixed amount of work, so when more workers than cores share them, each request just gets less CPU work done in its N ms. ` +
        `Real CPU-bound work (hashing, resizing an image) is a fixed amount of work and scales to at most about ${cores}x on this machine; a route that waits (a database query, a timer) needs no core while it waits, so it scales with the number of workers.`,
    );
  } else if (cpuBound) {
    lines.push(
      `This machine has ${cores} core${cores === 1 ? '' : 's'}. /heavy keeps a CPU busy, so a cluster scales it to at most about ${cores}x: ` +
        `each busy worker needs a core of its own, workers beyond ${cores} take turns on them, and autocannon needs CPU too. ` +
        'A route that waits instead (a database query, a timer) needs no core while it waits, so it scales with the number of workers.',
    );
  } else {
    lines.push(`On ${cores} cores, CPU-bound work scales to at most about ${cores}x with a cluster; waiting work scales with the number of workers.`);
  }
  const failing = results.filter((r) => r.errors + r.non2xx > 0);
  if (failing.length) lines.push(`Errors are requests that failed or did not answer 2xx: ${failing.map((r) => `${r.label} ${r.errors + r.non2xx}`).join(', ')}. A correct cluster has none.`);
  return lines.map((l) => wrap(l)).join('\n');
}

function wrap(text, width = 78) {
  const out = [];
  let line = '';
  for (const word of text.split(' ')) {
    if (line && line.length + word.length + 1 > width) {
      out.push(line);
      line = word;
    } else line = line ? `${line} ${word}` : word;
  }
  out.push(line);
  return out.join('\n');
}
