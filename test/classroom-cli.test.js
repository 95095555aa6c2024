// `cluster-workshop classroom` as an instructor runs it: what it prints, and
// that a classroom killed outright (kill -9) and started again has every
// result it acknowledged, with the same join code and token.
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import { startClassroomProcess } from './classroom-process.js';
import { request } from '../lib/harness/http.js';

let dir;
const procs = [];

beforeEach(() => {
  dir = mkdtempSync(joinPath(tmpdir(), 'classroom-cli-'));
});

afterEach(async () => {
  for (const p of procs.splice(0)) await p.stop('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

async function start(args = []) {
  const p = await startClassroomProcess({ cwd: dir, args });
  procs.push(p);
  return p;
}

const post = (p, path, body, code = p.code) => request(p.port, path, { method: 'POST', body, headers: { 'x-join-code': code } });
const state = (p) => request(p.port, '/api/state', { headers: { authorization: `Bearer ${p.token}` } });

test('prints the dashboard URL with the token, the join code and the exact join command', async () => {
  const p = await start(['--title', 'Friday class']);
  expect(p.output).toMatch(/Classroom "Friday class" is running\./);
  expect(p.output).toMatch(new RegExp(`http://127\\.0\\.0\\.1:${p.port}/#token=[0-9a-f]{32}`));
  expect(p.code).toMatch(/^[A-Z2-9]{6}$/);
  expect(p.output).toContain(`cluster-workshop join http://127.0.0.1:${p.port} --code ${p.code} --name "<your name>"`);
  const s = await state(p);
  expect(s.json).toMatchObject({ title: 'Friday class', joinUrl: `http://127.0.0.1:${p.port}`, joinCode: p.code });
});

test('a classroom killed with SIGKILL and started again has every acknowledged result', async () => {
  const p = await start();
  const ada = (await post(p, '/api/join', { name: 'Ada' })).json;
  const reports = Array.from({ length: 5 }, (_, i) => ({ id: `kill-test-${i}`, lesson: 'fork', passed: i === 4, failedStep: i === 4 ? null : 'worker-count', durationMs: 900, attempt: i + 1, at: new Date().toISOString() }));
  for (const r of reports) expect((await post(p, '/api/reports', { learner: ada.learner, key: ada.key, reports: [r] })).status).toBe(200);
  const before = (await state(p)).json.learners;
  await p.stop('SIGKILL');

  const again = await start();
  expect(again.output).toMatch(/resumed: 1 learner/);
  expect([again.code, again.token]).toEqual([p.code, p.token]);
  expect((await state(again)).json.learners).toEqual(before);
  expect(before[0].lessons.fork).toMatchObject({ reports: 5, attempts: 5, passedAt: expect.any(String) });
});

test('Ctrl-C stops it cleanly and says where the class is saved', async () => {
  const p = await start();
  const { code, output } = await p.stop('SIGINT');
  expect(code).toBe(0);
  expect(output).toMatch(/Classroom stopped \(SIGINT\); everything is saved in .*cluster-workshop-classroom\.json/);
});

test('a port in use or a broken state file: exit 2 with the fix', async () => {
  const p = await start();
  const busy = await startClassroomProcess({ cwd: dir, args: ['--port', String(p.port), '--state', 'other.json'], expectExit: true });
  expect(busy.exitCode).toBe(2);
  expect(busy.output).toMatch(/Port \d+ is already in use.*--port/);
  writeFileSync(joinPath(dir, 'broken.json'), 'nope');
  const broken = await startClassroomProcess({ cwd: dir, args: ['--state', 'broken.json'], expectExit: true });
  expect(broken.exitCode).toBe(2);
  expect(broken.output).toMatch(/could not be read.*--new/);
});

// Issue 14, item 1: one state file, one owner.
test('a second classroom in the same folder refuses with the holder pid and port, and changes nothing', async () => {
  const { readdirSync, readFileSync } = await import('node:fs');
  const files = () => Object.fromEntries(readdirSync(dir).map((f) => [f, readFileSync(joinPath(dir, f), 'latin1')]));
  const p = await start();
  const ada = (await post(p, '/api/join', { name: 'Ada' })).json;
  const report = (i) => ({ id: `owner-test-${i}`, lesson: 'fork', passed: false, failedStep: 'worker-count', durationMs: 900, attempt: i, at: new Date().toISOString() });
  for (let i = 1; i <= 3; i++) expect((await post(p, '/api/reports', { learner: ada.learner, key: ada.key, reports: [report(i)] })).status).toBe(200);
  const before = files();
  for (const args of [[], ['--port', '0']]) {
    const second = await startClassroomProcess({ cwd: dir, args, expectExit: true });
    expect(second.exitCode).toBe(2);
    expect(second.output).toContain(`in use by another classroom (pid ${p.child.pid}, port ${p.port})`);
    expect(second.output).not.toMatch(/\n\s+at /);
    expect(files()).toEqual(before);
  }
  // The first keeps acknowledging, and a kill -9 loses none of it.
  for (let i = 4; i <= 5; i++) expect((await post(p, '/api/reports', { learner: ada.learner, key: ada.key, reports: [report(i)] })).status).toBe(200);
  await p.stop('SIGKILL');
  const again = await start();
  expect((await state(again)).json.learners[0].lessons.fork.reports).toBe(5);
});

// Issue 14, item 3: a damaged but readable state file.
test('a state file with learners: null stops the start with exit 2, a sentence and no stack trace', async () => {
  const p = await start();
  await p.stop('SIGINT');
  const file = joinPath(dir, 'cluster-workshop-classroom.json');
  const { readFileSync } = await import('node:fs');
  const s = JSON.parse(readFileSync(file, 'utf8'));
  writeFileSync(file, JSON.stringify({ ...s, learners: null }));
  const r = await startClassroomProcess({ cwd: dir, expectExit: true });
  expect(r.exitCode).toBe(2);
  expect(r.output).toMatch(/could not be read: its learners is not an object\. Nothing was changed\..*--new/);
  expect(r.output).not.toMatch(/\n\s+at /);
});

test('.gitignore keeps the classroom state, its journal, .corrupt and lock files out of git', async () => {
  const { execFileSync } = await import('node:child_process');
  const names = ['cluster-workshop-classroom.json', 'cluster-workshop-classroom.json.journal', 'cluster-workshop-classroom.json.corrupt', 'cluster-workshop-classroom.json.lock', 'cluster-workshop-classroom.previous-1700000000000.json'];
  const root = new URL('..', import.meta.url).pathname;
  const ignored = execFileSync('git', ['check-ignore', '--no-index', ...names], { cwd: root, encoding: 'utf8' }).trim().split('\n');
  expect(ignored).toEqual(names);
});

test('a state file in a folder that does not exist: exit 2 with the fix, nothing created', async () => {
  const { readdirSync } = await import('node:fs');
  const r = await startClassroomProcess({ cwd: dir, args: ['--state', 'no-such-folder/class.json'], expectExit: true });
  expect(r.exitCode).toBe(2);
  expect(r.output).toMatch(/folder of the classroom state file .*no-such-folder\/class\.json does not exist/);
  expect(readdirSync(dir)).toEqual([]);
});
