#!/usr/bin/env node
// npm run bench:classroom [-- --learners 200] [-- --duration 60] [-- --interval 3] [-- --browser] [-- --stalled 20]
// Load on the classroom server as a class gives it: N learners (default 200)
// joined, each reporting a verify outcome every few seconds (uniformly 2-4 s
// by default) for the duration, while one dashboard follows the live stream.
// It runs the real `cluster-workshop classroom` in a child process and
// reports: how long a report takes to reach the dashboard (the goal: within
// 1 s), report request latency, refusals, and the server's memory (RSS from
// /proc) over the run, with the caps that bound it. With --browser, the
// dashboard page also runs in headless Chromium (CHROMIUM_PATH, default
// /usr/bin/chromium) and the time until a report shows in its grid is measured.
// With --stalled N, N dashboards connect first and never read a byte (a
// laptop asleep, or someone holding the streams open): the server's memory
// must stay flat (each stream's buffer is bounded) and the instructor's own
// dashboard, which connects after them, must still get in.
import { spawn } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { parseArgs } from 'node:util';
import http from 'node:http';
import net from 'node:net';
import { request } from '../lib/harness/http.js';
import { loadLessons } from '../lib/manifest.js';
import { LIMITS } from '../lib/classroom/limits.js';

const CLI = fileURLToPath(new URL('../bin/cluster-workshop.js', import.meta.url));
const GOAL_MS = 1000;

const { values } = parseArgs({
  options: {
    learners: { type: 'string', default: '200' },
    duration: { type: 'string', default: '60' },
    interval: { type: 'string', default: '3' },
    browser: { type: 'boolean', default: false },
    stalled: { type: 'string', default: '0' },
  },
});
const LEARNERS = Number(values.learners);
const DURATION_MS = Number(values.duration) * 1000;
const MEAN_INTERVAL_MS = Number(values.interval) * 1000;
const STALLED = Number(values.stalled);
if (![LEARNERS, DURATION_MS, MEAN_INTERVAL_MS].every((n) => Number.isFinite(n) && n > 0) || !(Number.isInteger(STALLED) && STALLED >= 0)) {
  console.error('usage: npm run bench:classroom -- [--learners N] [--duration seconds] [--interval seconds] [--browser] [--stalled N]');
  process.exit(2);
}

const catalogue = loadLessons();
const lessons = catalogue.map((l) => l.id);
// Failed steps are the lesson's real step ids (the classroom takes no other).
const stepsOf = new Map(catalogue.map((l) => [l.id, l.steps.map((s) => s.id)]));
const dir = mkdtempSync(join(tmpdir(), 'bench-classroom-'));
const stateFile = join(dir, 'class.json');

function startServer() {
  const child = spawn(process.execPath, [CLI, 'classroom', '--port', '0', '--host', '127.0.0.1', '--state', stateFile, '--title', 'bench'], { stdio: ['ignore', 'pipe', 'inherit'] });
  let out = '';
  return new Promise((resolve, reject) => {
    child.on('exit', (code) => reject(new Error(`classroom exited (${code}): ${out}`)));
    child.stdout.on('data', (d) => {
      out += d;
      const m = /#token=([0-9a-f]+)[\s\S]*Join code: (\S+)[\s\S]*join http:\/\/[^:]+:(\d+)/.exec(out);
      if (m && /Ctrl-C stops/.test(out)) resolve({ child, token: m[1], code: m[2], port: Number(m[3]) });
    });
  });
}

function rssMb(pid) {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8');
  return Number(/VmRSS:\s+(\d+)/.exec(status)[1]) / 1024;
}

const pct = (sorted, p) => (sorted.length ? sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))] : NaN);
const summary = (xs) => {
  const s = [...xs].sort((a, b) => a - b);
  return { n: s.length, p50: pct(s, 50), p95: pct(s, 95), p99: pct(s, 99), max: s.at(-1) ?? NaN };
};
const fmt = (s) => `median ${s.p50?.toFixed(0)} ms, p95 ${s.p95?.toFixed(0)} ms, p99 ${s.p99?.toFixed(0)} ms, max ${s.max?.toFixed(0)} ms (n=${s.n})`;

const server = await startServer();
const { port, token, code } = server;
const post = (path, body, localAddress) => request(port, path, { method: 'POST', body, localAddress, headers: { 'x-join-code': code }, timeoutMs: 10000 });
const memory = [];
const sampleMemory = async () => {
  const stats = await request(port, '/api/stats', { headers: { authorization: `Bearer ${token}` } });
  memory.push({ t: Date.now(), mb: rssMb(server.child.pid), heapMb: stats.json ? stats.json.memory.heapUsed / 1048576 : NaN, stats: stats.json });
};
await sampleMemory();
const idleMb = memory[0].mb;
const idleHeapMb = memory[0].heapMb;

// --- join -------------------------------------------------------------------
const learners = [];
for (let i = 0; i < LEARNERS; i++) {
  // Joins are limited per address (a burst of LIMITS.joinBurst): a class
  // this size comes from several networks.
  const r = await post('/api/join', { name: `Learner ${i + 1}` }, `127.0.0.${1 + Math.floor(i / (LIMITS.joinBurst / 2))}`);
  if (r.status !== 201) throw new Error(`join ${i + 1} failed: ${r.status} ${r.text}`);
  learners.push({ ...r.json, lesson: 0, tries: 0, seq: 0, counts: {}, pending: [] });
}
await sampleMemory();
const joinedMb = memory.at(-1).mb;
const joinedHeapMb = memory.at(-1).heapMb;

// --- dashboards that never read (--stalled) ------------------------------------
const stalled = [];
for (let i = 0; i < STALLED; i++) {
  const socket = net.connect(port, '127.0.0.1');
  socket.pause(); // never reads a byte: the kernel's buffers fill, then the server's
  socket.on('error', () => {});
  socket.write(`GET /api/events HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ${token}\r\n\r\n`);
  stalled.push(socket);
}
let stalledClosed = 0;
for (const s of stalled) s.on('close', () => (stalledClosed += 1));

// --- the dashboard ----------------------------------------------------------
const byId = new Map(learners.map((l) => [l.learner, l]));
const dashboardLatency = [];
let updates = 0;
const sse = await new Promise((resolve, reject) => {
  http.get({ port, host: '127.0.0.1', path: `/api/events?token=${token}` }, resolve).on('error', reject);
});
let buffer = '';
const instructorStatus = sse.statusCode;
sse.setEncoding('utf8');
sse.on('data', (chunk) => {
  buffer += chunk;
  let end;
  while ((end = buffer.indexOf('\n\n')) >= 0) {
    const block = buffer.slice(0, end);
    buffer = buffer.slice(end + 2);
    if (!block.startsWith('event: update')) continue;
    const at = performance.now();
    updates += 1;
    const data = JSON.parse(/^data: (.+)$/m.exec(block)[1]);
    for (const row of data.learners) {
      const l = byId.get(row.id);
      if (!l) continue;
      l.pending = l.pending.filter((p) => {
        if ((row.lessons[p.lesson]?.reports ?? 0) < p.count) return true;
        dashboardLatency.push(at - p.sentAt);
        return false;
      });
    }
  }
});

// --- the dashboard in a browser (--browser) ---------------------------------
const browserLatency = [];
let browserPending = null;
let browser = null;
if (values.browser) {
  const { chromium } = await import('playwright-core');
  browser = await chromium.launchPersistentContext(join(dir, 'chromium-profile'), {
    executablePath: process.env.CHROMIUM_PATH ?? '/usr/bin/chromium',
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  const page = await browser.newPage();
  browserPending = new Map();
  // Each render replaces the grid's rows: report the cells whose count changed.
  await page.exposeFunction('benchSeen', (t, cells) => {
    for (const [learner, lesson, count] of cells) {
      const key = `${learner} ${lesson} ${count}`;
      const sentAt = browserPending.get(key);
      if (sentAt !== undefined) {
        browserLatency.push(t - sentAt);
        browserPending.delete(key);
      }
    }
  });
  await page.addInitScript(() => {
    const last = new Map();
    const observer = new MutationObserver(() => {
      const t = Date.now();
      const changed = [];
      for (const td of document.querySelectorAll('#grid tbody td[data-lesson]')) {
        if (td.dataset.status === 'not-started') continue;
        const key = `${td.parentElement.dataset.learner} ${td.dataset.lesson}`;
        const count = Number.parseInt(td.textContent.slice(2), 10);
        if (last.get(key) !== count) {
          last.set(key, count);
          changed.push([td.parentElement.dataset.learner, td.dataset.lesson, count]);
        }
      }
      if (changed.length) window.benchSeen(t, changed);
    });
    document.addEventListener('DOMContentLoaded', () => observer.observe(document.querySelector('#grid tbody'), { childList: true }));
  });
  await page.goto(`http://127.0.0.1:${port}/#token=${token}`);
  await page.waitForSelector('#live[data-state="live"]');
}

// --- the class --------------------------------------------------------------
const requestLatency = [];
const statuses = {};
let sent = 0;
const started = Date.now();
const stopAt = started + DURATION_MS;

/** The next verify outcome of a learner: a few failures, then a pass, then the next lesson. */
function nextReport(l) {
  const lesson = lessons[l.lesson % lessons.length];
  l.tries += 1;
  const passed = Math.random() < 0.35 || l.tries >= 5;
  if (passed) {
    l.lesson += 1;
    l.tries = 0;
  }
  l.counts[lesson] = (l.counts[lesson] ?? 0) + 1;
  return {
    report: { id: `b${l.learner}-${++l.seq}-xxxx`, lesson, passed, failedStep: passed ? null : stepsOf.get(lesson)[Math.floor(Math.random() * stepsOf.get(lesson).length)], durationMs: 1000 + Math.floor(Math.random() * 4000), attempt: l.counts[lesson], at: new Date().toISOString() },
    count: l.counts[lesson],
  };
}

async function learnerLoop(l) {
  const jitter = () => MEAN_INTERVAL_MS * (2 / 3 + (Math.random() * 2) / 3);
  await new Promise((r) => setTimeout(r, Math.random() * MEAN_INTERVAL_MS));
  while (Date.now() < stopAt) {
    const { report, count } = nextReport(l);
    const sentAt = performance.now();
    l.pending.push({ lesson: report.lesson, count, sentAt });
    if (browserPending) browserPending.set(`${l.learner} ${report.lesson} ${count}`, Date.now());
    const r = await post('/api/reports', { learner: l.learner, key: l.key, reports: [report] });
    sent += 1;
    requestLatency.push(performance.now() - sentAt);
    const key = r.ok ? String(r.status) : r.code;
    statuses[key] = (statuses[key] ?? 0) + 1;
    if (r.status !== 200) {
      l.pending = l.pending.filter((p) => p.sentAt !== sentAt);
      browserPending?.delete(`${l.learner} ${report.lesson} ${count}`);
    }
    await new Promise((res) => setTimeout(res, jitter()));
  }
}

const memoryTimer = setInterval(sampleMemory, 1000);
const progressTimer = setInterval(() => {
  const s = summary(dashboardLatency.slice(-500));
  process.stderr.write(`  ${Math.round((Date.now() - started) / 1000)} s: ${sent} reports, dashboard median ${s.p50?.toFixed(0)} ms, rss ${memory.at(-1).mb.toFixed(1)} MB\n`);
}, 10000);
console.log(`classroom bench: ${LEARNERS} learners, one report each every ${(MEAN_INTERVAL_MS * 2) / 3000}-${(MEAN_INTERVAL_MS * 4) / 3000} s, for ${DURATION_MS / 1000} s`);
await Promise.all(learners.map(learnerLoop));
// Let the last updates arrive.
const drainUntil = Date.now() + 3000;
while (learners.some((l) => l.pending.length) && Date.now() < drainUntil) await new Promise((r) => setTimeout(r, 50));
clearInterval(memoryTimer);
clearInterval(progressTimer);
await sampleMemory();
const lost = learners.reduce((n, l) => n + l.pending.length, 0);
const browserLost = browserPending?.size ?? 0;
await browser?.close();
sse.destroy();
server.child.removeAllListeners('exit');
server.child.kill('SIGINT');
await new Promise((r) => server.child.on('exit', r));
// Read after the stop, which writes the state whole.
const history = JSON.parse(readFileSync(stateFile, 'utf8')).history.length;
for (const s of stalled) s.destroy();
const stateKb = statSync(stateFile).size / 1024;
rmSync(dir, { recursive: true, force: true });

const elapsed = DURATION_MS / 1000;
const dash = summary(dashboardLatency);
const reqs = summary(requestLatency);
const peak = Math.max(...memory.map((m) => m.mb));
const range = (xs, k) => `${Math.min(...xs.map((m) => m[k])).toFixed(1)}-${Math.max(...xs.map((m) => m[k])).toFixed(1)}`;
const half = memory.filter((m) => m.t >= started + DURATION_MS / 2);
const during = memory.filter((m) => m.t >= started);
const timeline = [0.25, 0.5, 0.75, 1].map((f) => {
  const m = during[Math.min(during.length - 1, Math.max(0, Math.round(f * during.length) - 1))];
  return `${Math.round((m.t - started) / 1000)} s ${m.mb.toFixed(0)} MB`;
});
const lastStats = memory.findLast((m) => m.stats)?.stats ?? {};
const stalledLine = STALLED
  ? `\nstalled dashboards  ${STALLED} never reading; the server dropped ${lastStats.dashboardsDropped ?? '?'} for reading too slowly and evicted ${lastStats.dashboardsEvicted ?? '?'} for newer ones (${stalledClosed} of their connections closed); bytes waiting in the server's streams: peak ${(Math.max(...memory.map((m) => m.stats?.dashboardBufferedBytes ?? 0)) / 1048576).toFixed(1)} MB (bound ${LIMITS.maxStreamBufferBytes / 1048576} MB per stream), end ${lastStats.dashboardBufferedBytes ?? '?'}; the instructor's dashboard, opened after them, got ${instructorStatus}\nmemory over the run ${timeline.join(', ')}`
  : '';
console.log(`
reports sent        ${sent} in ${elapsed.toFixed(0)} s (${(sent / elapsed).toFixed(1)}/s); answers ${JSON.stringify(statuses)}
report -> dashboard ${fmt(dash)}; ${updates} update events; ${lost} never shown
report request      ${fmt(reqs)}${values.browser ? `\nreport -> browser   ${fmt(summary(browserLatency))}; ${browserLost} never shown (grid in headless Chromium)` : ''}
server memory (RSS) idle ${idleMb.toFixed(1)} MB, after ${LEARNERS} joins ${joinedMb.toFixed(1)} MB, peak ${peak.toFixed(1)} MB, second half ${range(half, 'mb')} MB, end ${memory.at(-1).mb.toFixed(1)} MB
server heap used    idle ${idleHeapMb.toFixed(1)} MB, after joins ${joinedHeapMb.toFixed(1)} MB, peak ${Math.max(...memory.map((m) => m.heapMb)).toFixed(1)} MB, second half ${range(half, 'heapMb')} MB, end ${memory.at(-1).heapMb.toFixed(1)} MB
state file          ${stateKb.toFixed(0)} KB, ${history} attempts in the history (cap ${LIMITS.maxStoredAttempts}; learners cap ${LIMITS.maxLearners})${stalledLine}`);
const ok = instructorStatus === 200 && dash.p99 <= GOAL_MS && lost === 0 && (statuses['200'] ?? 0) === sent && (!values.browser || (summary(browserLatency).p99 <= GOAL_MS && browserLost === 0));
console.log(ok ? `OK: 99% of reports reached the dashboard within ${GOAL_MS} ms, none lost or refused.` : `MISSED: the goal is every report accepted and on the dashboard within ${GOAL_MS} ms (p99).`);
process.exitCode = ok ? 0 : 1;
