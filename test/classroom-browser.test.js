// The dashboard in a real browser (Debian's headless Chromium driven by
// playwright-core): it loads with the instructor token, a learner's report
// arrives live and the grid shows it, a learner called
// <img src=x onerror=alert(1)> shows as text everywhere, and the stuck list
// and failing steps follow. .ci/run installs chromium.
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
  expect(await page.textContent('#grid tbody')).toContain('No learner has joined yet.');

  const evil = (await post('/api/join', { name: XSS })).json;
  expect((await report(evil, {})).status).toBe(200);

  // No reload: the cell appears through the live stream.
  const cell = await page.waitForSelector(`tr[data-learner="${evil.learner}"] td[data-lesson="fork"][data-status="failing"]`);
  expect(await cell.textContent()).toBe('✗ 1');
  expect(await cell.getAttribute('title')).toContain('"the primary has exactly 3 workers"');
  expect(await page.textContent(`tr[data-learner="${evil.learner}"] td.learner`)).toBe(XSS);
  expect(await page.locator('img').count()).toBe(0);
  expect(await page.textContent('#failing')).toContain('the primary has exactly 3 workers: 1 learner (1 failures)');
});

test('three failures in a row at one step put the learner on the stuck list, as text', async () => {
  const key = (await post('/api/join', { name: 'Bob <script>alert(2)</script>' })).json;
  for (let i = 0; i < 3; i++) expect((await report(key, {})).status).toBe(200);
  await page.waitForSelector(`#stuck li[data-learner="${key.learner}"]`);
  expect(await page.textContent(`#stuck li[data-learner="${key.learner}"]`)).toBe('Bob <script>alert(2)</script>: 3 failures in a row at "the primary has exactly 3 workers" (lesson 2 fork)');
  expect(await page.getAttribute(`tr[data-learner="${key.learner}"]`, 'class')).toBe('stuck');
  expect(await page.getAttribute(`tr[data-learner="${key.learner}"] td[data-lesson="fork"]`, 'class')).toBe('cell failing stuck');
  // A pass takes them off the list and turns the cell green.
  expect((await report(key, { passed: true, failedStep: null })).status).toBe(200);
  await page.waitForSelector(`tr[data-learner="${key.learner}"] td[data-lesson="fork"][data-status="passed"]`);
  expect(await page.locator(`#stuck li[data-learner="${key.learner}"]`).count()).toBe(0);
  expect(await page.textContent('#counts')).toBe('2 learners · 0 stuck · 0 finished');
  expect(await page.locator('script:not([src])').count()).toBe(0);
});

test('the export links download with the token; nothing ever ran from a name', async () => {
  const csv = await page.evaluate(async () => (await fetch(document.getElementById('export-csv').href)).text());
  expect(csv.split('\r\n')[0]).toMatch(/^learner,lesson_number,lesson,status/);
  expect(csv).toContain(`${XSS},2,fork,failing,1`);
  const json = await page.evaluate(async () => (await fetch(document.getElementById('export-json').href)).json());
  expect(json.learners.map((l) => l.name).sort()).toEqual(['<img src=x onerror=alert(1)>', 'Bob <script>alert(2)</script>'].sort());
  expect(dialogs).toEqual([]);
  expect(pageErrors).toEqual([]);
});

test('a dashboard opened with a wrong token explains itself', async () => {
  const other = await browser.newPage();
  await other.goto(`${classroom.url}/#token=${'0'.repeat(32)}`);
  await other.waitForSelector('#problem:not([hidden])');
  expect(await other.textContent('#problem')).toMatch(/refused this dashboard token/);
  await other.close();
});
