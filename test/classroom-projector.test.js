// The dashboard as a projector shows it (issue 14, item 10): in headless
// Chromium at 1024x768 and 1280x720, with 8, 30 and 200 learners at various
// points of the course (some stuck on a step, some without progress for a
// while). What the room must read is checked as layout: the steps that fail
// most come first and sit above the fold, the type is large, the stuck list
// is capped, the page never scrolls sideways, names sort as numbers read.
// Screenshots go to /tmp/classroom-shots/ (CLASSROOM_SHOTS to change) to be
// looked at.
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import { chromium } from 'playwright-core';
import { createClassroom } from '../lib/classroom/server.js';
import { request } from '../lib/harness/http.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const SHOTS = process.env.CLASSROOM_SHOTS ?? '/tmp/classroom-shots';
const SIZES = [
  [1024, 768],
  [1280, 720],
];
const CLASSES = [8, 30, 200];

let dir;
let browser;

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`No Chromium at ${CHROMIUM}: install it (apt-get install -y chromium) or set CHROMIUM_PATH.`);
  dir = mkdtempSync(joinPath(tmpdir(), 'classroom-projector-'));
  mkdirSync(SHOTS, { recursive: true });
  browser = await chromium.launchPersistentContext(joinPath(dir, 'chromium-profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
});

afterAll(async () => {
  await browser?.close();
  if (dir) rmSync(dir, { recursive: true, force: true });
});

/** A class of n learners 25 minutes in: a spread of progress, a few stuck at a step, a few idle. */
async function classOf(n) {
  let clock = Date.parse('2026-03-02T09:00:00Z');
  const c = await createClassroom({ stateFile: joinPath(dir, `class-${n}.json`), title: 'Thursday cluster workshop', now: () => clock, limits: { joinBurst: 1000, reportBurst: 1000 }, warn: () => {} });
  const { port } = await c.listen(0, '127.0.0.1');
  c.setJoinUrl('http://192.168.1.20:4100');
  const lessons = c.lessons.filter((l) => !l.optional);
  const names = ['Zoë Ñúñez', '李小龍', "Aoife O'Brien", 'Ada Lovelace', 'Grace Hopper', 'Learner 10', 'Learner 2', 'Learner 100'];
  const nameOf = (i) => names[i] ?? `Student ${i + 1}`;
  const post = (path, body) => request(port, path, { method: 'POST', body, headers: { 'x-join-code': c.store.joinCode } });
  let id = 0;
  const joined = [];
  for (let i = 0; i < n; i++) {
    const who = (await post('/api/join', { name: nameOf(i) })).json;
    joined.push({ who, i });
    const done = i % 5; // lessons passed
    const reports = [];
    for (let k = 0; k < done; k++) reports.push({ lesson: lessons[k].id, passed: true, failedStep: null });
    const current = lessons[done];
    const steps = Object.keys(current.steps);
    // Every fourth learner fails three times at one step (stuck); the others once or twice.
    const fails = i % 4 === 1 ? 3 : 1 + (i % 2);
    const step = steps[Math.min(steps.length - 1, 1 + (i % 3))];
    for (let k = 0; k < fails; k++) reports.push({ lesson: current.id, passed: false, failedStep: step });
    for (const r of reports) {
      clock += 1000;
      await post('/api/reports', { learner: who.learner, key: who.key, reports: [{ id: `shot-${++id}-report`, durationMs: 2000, attempt: 1, at: new Date(clock).toISOString(), ...r }] });
    }
  }
  clock += 11 * 60000;
  // Two learners in three got further just now; the others made no progress for 11 minutes.
  for (const { who, i } of joined) {
    if (i % 3 === 2) continue;
    const current = lessons[i % 5];
    await post('/api/reports', { learner: who.learner, key: who.key, reports: [{ id: `shot-${++id}-report`, durationMs: 2000, attempt: 1, at: new Date(clock).toISOString(), lesson: current.id, passed: true, failedStep: null }] });
  }
  return { c, port, token: c.store.instructorToken };
}

describe.each(CLASSES)('%i learners', (n) => {
  let cls;
  beforeAll(async () => {
    cls = await classOf(n);
  });
  afterAll(async () => {
    await cls.c.close();
  });

  test.each(SIZES)('at %ix%i: failing steps first and above the fold, large type, capped stuck list, no sideways scroll', async (width, height) => {
    const page = await browser.newPage();
    await page.setViewportSize({ width, height });
    await page.goto(`http://127.0.0.1:${cls.port}/#token=${cls.token}`);
    await page.waitForSelector('#live[data-state="live"]');
    await page.waitForSelector('.tile');
    const layout = await page.evaluate(() => {
      const box = (sel) => document.querySelector(sel).getBoundingClientRect();
      const px = (sel) => Number.parseFloat(getComputedStyle(document.querySelector(sel)).fontSize);
      return {
        failing: box('#failing'),
        failingItems: document.querySelectorAll('#failing li').length,
        stuckItems: document.querySelectorAll('#stuck li').length,
        grid: box('#grid'),
        failingPx: px('#failing li'),
        stuckPx: px('#stuck li'),
        countsPx: px('#counts'),
        titlePx: px('#title'),
        scrollWidth: document.documentElement.scrollWidth,
        names: [...document.querySelectorAll('.tile .name')].map((e) => e.textContent),
        stuckTiles: document.querySelectorAll('.tile.stuck').length,
        counts: document.getElementById('counts').textContent,
      };
    });
    await page.screenshot({ path: joinPath(SHOTS, `projector-${width}x${height}-${n}-learners.png`) });
    await page.close();

    expect(layout.failingItems).toBeGreaterThan(0);
    expect(layout.failing.top).toBeLessThan(layout.grid.top);
    expect(layout.failing.bottom).toBeLessThanOrEqual(height);
    expect(layout.failingPx).toBeGreaterThanOrEqual(18);
    expect(layout.stuckPx).toBeGreaterThanOrEqual(16);
    expect(layout.countsPx).toBeGreaterThanOrEqual(18);
    expect(layout.titlePx).toBeGreaterThanOrEqual(24);
    expect(layout.stuckItems).toBeLessThanOrEqual(7); // six and "and N more"
    expect(layout.scrollWidth).toBeLessThanOrEqual(width);
    const stuck = Number(/(\d+) stuck/.exec(layout.counts)[1]);
    expect(stuck).toBeGreaterThan(0);
    expect(stuck).toBeLessThan(n);
    expect(layout.stuckTiles).toBe(stuck);
    // Small classes fit on the screen whole.
    if (n <= 30) expect(layout.grid.bottom).toBeLessThanOrEqual(height + 40);
    if (n === 8) expect(layout.names.indexOf('Learner 2')).toBeLessThan(layout.names.indexOf('Learner 10'));
    if (n === 8) expect(layout.names.indexOf('Learner 10')).toBeLessThan(layout.names.indexOf('Learner 100'));
  });
});
