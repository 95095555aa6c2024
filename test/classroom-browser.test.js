// The dashboard in a real browser (Debian's headless Chromium driven by
// playwright-core): it loads with the instructor token and takes it out of
// the address bar, a learner's report arrives live and the grid shows it, a
// learner called <img src=x onerror=alert(1)> shows as text everywhere, the
// stuck list and failing steps follow, and the instructor manages learners.
// .ci/run installs chromium. The projector sizes: classroom-projector.test.js.
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import { chromium } from 'playwright-core';
import { startClassroomProcess } from './classroom-process.js';
import { request } from '../lib/harness/http.js';

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';
const XSS = '<img src=x onerror=alert(1)>';
const UI_TIMEOUT_MS = 15000;

let dir;
let classroom;
let browser;
let page;
const dialogs = [];
const pageErrors = [];

beforeAll(async () => {
  if (!existsSync(CHROMIUM)) throw new Error(`No Chromium at ${CHROMIUM}: install it (apt-get install -y chromium; .ci/run does) or set CHROMIUM_PATH.`);
  dir = mkdtempSync(joinPath(tmpdir(), 'classroom-browser-'));
  classroom = await startClassroomProcess({ cwd: dir, args: ['--title', 'Browser <b>test</b>'] });
  browser = await chromium.launchPersistentContext(joinPath(dir, 'chromium-profile'), {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  });
  page = await browser.newPage();
  page.setDefaultTimeout(UI_TIMEOUT_MS);
  page.on('dialog', (d) => {
    dialogs.push(d.message());
    d.dismiss().catch(() => {});
  });
  page.on('pageerror', (e) => pageErrors.push(e.message));
});

afterAll(async () => {
  await browser?.close();
  await classroom?.stop('SIGINT');
  if (dir) rmSync(dir, { recursive: true, force: true });
});

const post = (path, body) => request(classroom.port, path, { method: 'POST', body, headers: { 'x-join-code': classroom.code } });
let n = 0;
const report = (learner, fields) => post('/api/reports', {
  learner: learner.learner,
  key: learner.key,
  reports: [{ id: `browser-${++n}-report`, lesson: 'fork', passed: false, failedStep: 'worker-count', durationMs: 800, attempt: n, at: new Date().toISOString(), ...fields }],
});

test('a report arrives live and the grid shows it; the XSS name shows as text', async () => {
  await page.goto(`${classroom.url}/#token=${classroom.token}`);
  await page.waitForSelector('#live[data-state="live"]');
  expect(await page.textContent('#title')).toBe('Browser <b>test</b>');
  expect(await page.textContent('#join-command')).toBe(`cluster-workshop join ${classroom.url} --code ${classroom.code} --name "<your name>"`);
  expect(await page.textContent('#grid')).toContain('No learner has joined yet.');

  const evil = (await post('/api/join', { name: XSS })).json;
  expect((await report(evil, {})).status).toBe(200);

  // No reload: the cell appears through the live stream.
  const cell = await page.waitForSelector(`.tile[data-learner="${evil.learner}"] [data-lesson="fork"][data-status="failing"]`);
  expect(await cell.textContent()).toBe('2');
  expect(await cell.getAttribute('title')).toContain('"the primary has exactly 3 workers"');
  expect(await page.textContent(`.tile[data-learner="${evil.learner}"] .name`)).toBe(XSS);
  expect(await page.locator('img').count()).toBe(0);
  expect(await page.textContent('#failing')).toBe('1 learner: the primary has exactly 3 workers lesson 2 fork · 1 failure · 0 passed');
});

test('three failures in a row at one step put the learner on the stuck list and highlight them in the grid, as text', async () => {
  const key = (await post('/api/join', { name: 'Bob <script>alert(2)</script>' })).json;
  for (let i = 0; i < 3; i++) expect((await report(key, {})).status).toBe(200);
  await page.waitForSelector(`#stuck li[data-learner="${key.learner}"]`);
  expect(await page.textContent(`#stuck li[data-learner="${key.learner}"]`)).toBe('Bob <script>alert(2)</script> 3 failures in a row at "the primary has exactly 3 workers" (lesson 2 fork)');
  expect(await page.getAttribute(`.tile[data-learner="${key.learner}"]`, 'class')).toBe('tile stuck');
  expect(await page.getAttribute(`.tile[data-learner="${key.learner}"] [data-lesson="fork"]`, 'class')).toBe('cell failing stuck');
  // A pass takes them off the list and turns the cell green.
  expect((await report(key, { passed: true, failedStep: null })).status).toBe(200);
  await page.waitForSelector(`.tile[data-learner="${key.learner}"] [data-lesson="fork"][data-status="passed"]`);
  expect(await page.locator(`#stuck li[data-learner="${key.learner}"]`).count()).toBe(0);
  expect(await page.textContent('#counts')).toBe('2 learners · 0 stuck · 0 finished');
  expect(await page.locator('script:not([src])').count()).toBe(0);
});

// Issue 14, item 9.
test('the token leaves the address bar and every link; exports and a reload still work', async () => {
  expect(page.url()).not.toContain(classroom.token);
  expect(page.url()).not.toContain('token');
  expect(await page.evaluate((t) => document.documentElement.outerHTML.includes(t), classroom.token)).toBe(false);
  const csv = await page.evaluate(async () => {
    const r = await fetch('/api/export.csv');
    return r.text();
  });
  expect(csv.split('\r\n')[0]).toMatch(/^\uFEFF?learner,lesson_number,lesson,status/);
  expect(csv).toContain(`${XSS},2,fork,failing,1`);
  const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-json')]);
  const { readFileSync } = await import('node:fs');
  const json = JSON.parse(readFileSync(await download.path(), 'utf8'));
  expect(json.learners.map((l) => l.name).sort()).toEqual(['<img src=x onerror=alert(1)>', 'Bob <script>alert(2)</script>'].sort());
  // A reload (the URL has no token now) goes on with the cookie.
  await page.reload();
  await page.waitForSelector('#live[data-state="live"]');
  expect(await page.locator('.tile').count()).toBe(2);
  expect(dialogs).toEqual([]);
  expect(pageErrors).toEqual([]);
});

// Issue 14, item 4 (the dashboard side).
test('the instructor renames a learner and lets them join again from the dashboard', async () => {
  const carol = (await post('/api/join', { name: 'Carol' })).json;
  await page.waitForSelector(`.tile[data-learner="${carol.learner}"]`);
  await page.click(`.tile[data-learner="${carol.learner}"] .name`);
  await page.fill('#manage-rename', 'Carol B.');
  await page.click('#manage-save');
  await page.waitForFunction((id) => document.querySelector(`.tile[data-learner="${id}"] .name`)?.textContent === 'Carol B.', carol.learner);
  await page.click(`.tile[data-learner="${carol.learner}"] .name`);
  await page.click('#manage-rejoin');
  const back = await post('/api/join', { name: 'carol b.' });
  expect([back.status, back.json.learner]).toEqual([201, carol.learner]);
  await page.click(`.tile[data-learner="${carol.learner}"] .name`);
  await page.click('#manage-remove');
  await page.click('#manage-remove');
  await page.waitForSelector(`.tile[data-learner="${carol.learner}"]`, { state: 'detached' });
});

test('a dashboard opened with a wrong token explains itself', async () => {
  const other = await browser.newPage();
  await other.goto(`${classroom.url}/#token=${'0'.repeat(32)}`);
  await other.waitForSelector('#problem:not([hidden])');
  expect(await other.textContent('#problem')).toMatch(/refused this dashboard token/);
  await other.close();
});
