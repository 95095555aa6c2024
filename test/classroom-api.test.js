// The classroom server's HTTP API, in process: joining, reporting, validation
// (invalid input gets 400 and changes nothing), secrets (bare 401/403), rate
// limits, bounded memory, live updates and restart persistence.
import { mkdtempSync, readFileSync, readdirSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import http from 'node:http';
import { createClassroom } from '../lib/classroom/server.js';
import { request } from '../lib/harness/http.js';
import { LIMITS } from '../lib/classroom/limits.js';

const XSS = '<img src=x onerror=alert(1)>';
let dir;
const open = []; // classrooms to close after each test

beforeEach(() => {
  dir = mkdtempSync(joinPath(tmpdir(), 'classroom-api-'));
});

afterEach(async () => {
  for (const c of open.splice(0)) await c.close();
  rmSync(dir, { recursive: true, force: true });
});

async function start(options = {}) {
  const classroom = await createClassroom({ stateFile: joinPath(dir, 'class.json'), title: 'API test', ...options });
  const { port } = await classroom.listen(0, '127.0.0.1');
  open.push(classroom);
  const call = (method, path, { body, code = classroom.store.joinCode, token, headers = {} } = {}) =>
    request(port, path, {
      method,
      body,
      headers: { ...(code && { 'x-join-code': code }), ...(token && { authorization: `Bearer ${token}` }), ...headers },
    });
  const instructor = (path) => call('GET', path, { code: null, token: classroom.store.instructorToken });
  const join = (name) => call('POST', '/api/join', { body: { name } });
  let reportId = 0;
  const report = (learner, fields = {}) => ({
    id: `report-${String(++reportId).padStart(4, '0')}`,
    lesson: 'fork',
    passed: false,
    failedStep: 'worker-count',
    durationMs: 1234,
    attempt: reportId,
    at: new Date().toISOString(),
    ...fields,
  });
  const send = (learner, reports, opts) => call('POST', '/api/reports', { body: { learner: learner.learner, key: learner.key, reports }, ...opts });
  return { classroom, port, call, instructor, join, report, send };
}

/** The state file and its journal, as they are on disk now. */
const onDisk = (t) => [readFileSync(t.classroom.store.file, 'utf8'), readFileSync(t.classroom.store.journalFile, 'utf8')];
const stateOf = async (t) => (await t.instructor('/api/state')).json;

describe('joining', () => {
  test('a learner joins with the code and appears on the dashboard, the XSS name verbatim', async () => {
    const t = await start();
    const r = await t.join(XSS);
    expect(r.status).toBe(201);
    expect(r.json).toEqual({ learner: expect.any(String), key: expect.stringMatching(/^[0-9a-f]{32}$/), name: XSS, title: 'API test', rejoined: false });
    const state = await stateOf(t);
    expect(state.learners.map((l) => l.name)).toEqual([XSS]);
    // The key never leaves the server after the join.
    expect(JSON.stringify(state)).not.toContain(r.json.key);
  });

  test('the code is accepted in any case and with spaces around it', async () => {
    const t = await start();
    const r = await t.call('POST', '/api/join', { body: { name: 'Ada' }, code: ` ${t.classroom.store.joinCode.toLowerCase()} ` });
    expect(r.status).toBe(201);
  });

  test('a missing code gets a bare 401, a wrong one a bare 403, and nobody joins', async () => {
    const t = await start();
    const missing = await t.call('POST', '/api/join', { body: { name: 'Ada' }, code: null });
    const wrong = await t.call('POST', '/api/join', { body: { name: 'Ada' }, code: 'WRONG1' });
    expect([missing.status, missing.text]).toEqual([401, 'Unauthorized']);
    expect([wrong.status, wrong.text]).toEqual([403, 'Forbidden']);
    expect((await stateOf(t)).learners).toEqual([]);
  });

  test.each([
    ['empty', ''],
    ['only spaces', '   '],
    ['41 characters', 'a'.repeat(41)],
    ['a newline', 'Ada\nLovelace'],
    ['a control character', 'Ada\u0007'],
    ['a right-to-left override', 'Ada\u202Eecalevol'],
    ['a zero-width space', 'Ada\u200B'],
    ['a number', 42],
    ['null', null],
  ])('a name that is %s gets 400 and changes nothing', async (_, name) => {
    const t = await start();
    const before = onDisk(t);
    const r = await t.join(name);
    expect(r.status).toBe(400);
    expect(r.json.error).toMatch(/name/);
    expect((await stateOf(t)).learners).toEqual([]);
    expect(onDisk(t)).toEqual(before);
  });

  test('names of any script, with punctuation, are accepted (40 characters at most)', async () => {
    const t = await start();
    for (const name of ['Zoë Ñúñez', '李小龍', "O'Brien-Smith", 'ü'.repeat(40)]) expect((await t.join(name)).status).toBe(201);
  });

  test('unexpected fields and bodies that are not objects get 400', async () => {
    const t = await start();
    expect((await t.call('POST', '/api/join', { body: { name: 'Ada', admin: true } })).status).toBe(400);
    expect((await t.call('POST', '/api/join', { body: ['Ada'] })).status).toBe(400);
    expect((await t.call('POST', '/api/join', { body: '{"name": "Ada"' })).status).toBe(400);
    expect((await stateOf(t)).learners).toEqual([]);
  });

  test('a name already in the class (any case) gets 409 with what to do', async () => {
    const t = await start();
    expect((await t.join('Ada')).status).toBe(201);
    const again = await t.join('ADA');
    expect(again.status).toBe(409);
    expect(again.json.error).toMatch(/another name/);
    expect((await stateOf(t)).learners).toHaveLength(1);
  });

  test('the class is capped: a join beyond maxLearners gets 409', async () => {
    const t = await start({ limits: { maxLearners: 3 } });
    for (const n of ['a', 'b', 'c']) expect((await t.join(n)).status).toBe(201);
    const full = await t.join('d');
    expect(full.status).toBe(409);
    expect(full.json.error).toMatch(/full/);
    expect((await stateOf(t)).learners).toHaveLength(3);
  });
});

describe('reporting', () => {
  test('a report updates the learner: attempts, status, failed step, stuck streak', async () => {
    const t = await start();
    const ada = (await t.join('Ada')).json;
    for (let i = 1; i <= 3; i++) expect((await t.send(ada, [t.report(ada, { attempt: i })])).json).toEqual({ accepted: 1, duplicates: 0 });
    let row = (await stateOf(t)).learners[0];
    expect(row.lessons.fork).toMatchObject({ attempts: 3, passedAt: null, lastFailedStep: 'worker-count', streak: 3, streakStep: 'worker-count', fails: { 'worker-count': 3 } });
    expect(row.lastLesson).toBe('fork');
    await t.send(ada, [t.report(ada, { passed: true, failedStep: null, attempt: 4 })]);
    row = (await stateOf(t)).learners[0];
    expect(row.lessons.fork).toMatchObject({ attempts: 4, passedAt: expect.any(String), lastPassed: true, streak: 0, fails: { 'worker-count': 3 } });
  });

  test('a report sent twice (a retry) counts once', async () => {
    const t = await start();
    const ada = (await t.join('Ada')).json;
    const r = t.report(ada);
    expect((await t.send(ada, [r])).json).toEqual({ accepted: 1, duplicates: 0 });
    expect((await t.send(ada, [r])).json).toEqual({ accepted: 0, duplicates: 1 });
    expect((await stateOf(t)).learners[0].lessons.fork.reports).toBe(1);
  });

  test.each([
    ['an unknown lesson', { lesson: 'no-such-lesson' }],
    ['a lesson given by number', { lesson: 2 }],
    ['passed as a string', { passed: 'yes' }],
    ['a failure without its step', { failedStep: null }],
    ['a pass with a failed step', { passed: true, failedStep: 'worker-count' }],
    ['a step id with markup', { failedStep: '<b>x</b>' }],
    ['a negative duration', { durationMs: -1 }],
    ['a fractional duration', { durationMs: 1.5 }],
    ['attempt 0', { attempt: 0 }],
    ['a timestamp that is not one', { at: 'yesterday' }],
    ['a bad report id', { id: 'x' }],
    ['code in it', { code: 'import cluster from "node:cluster"' }],
  ])('a report with %s gets 400 and changes nothing', async (_, fields) => {
    const t = await start();
    const ada = (await t.join('Ada')).json;
    await t.send(ada, [t.report(ada)]);
    const before = await stateOf(t);
    const file = onDisk(t);
    // The bad report comes second: the good one before it is not applied either.
    const r = await t.send(ada, [t.report(ada), t.report(ada, fields)]);
    expect(r.status).toBe(400);
    expect(r.json.error).toMatch(/^report 2: /);
    expect((await stateOf(t)).learners).toEqual(before.learners);
    expect(onDisk(t)).toEqual(file);
  });

  test('batches beyond the limit, bad JSON and bodies over the size limit are refused', async () => {
    const t = await start({ limits: { reportBurst: 100 } });
    const ada = (await t.join('Ada')).json;
    const many = Array.from({ length: LIMITS.maxReportsPerRequest + 1 }, () => t.report(ada));
    expect((await t.send(ada, many)).status).toBe(400);
    expect((await t.send(ada, [])).status).toBe(400);
    expect((await t.call('POST', '/api/reports', { body: '{"learner":' })).status).toBe(400);
    const huge = await t.call('POST', '/api/reports', { body: { learner: ada.learner, key: ada.key, reports: [t.report(ada)], pad: 'x'.repeat(LIMITS.maxBodyBytes) } });
    expect(huge.status).toBe(413);
    expect((await stateOf(t)).learners[0].lessons).toEqual({});
  });

  test('reports need the join code and the learner key: bare 401/403', async () => {
    const t = await start();
    const ada = (await t.join('Ada')).json;
    const bob = (await t.join('Bob')).json;
    const cases = [
      [await t.send(ada, [t.report(ada)], { code: null }), 401],
      [await t.send(ada, [t.report(ada)], { code: 'WRONG1' }), 403],
      [await t.send({ learner: ada.learner, key: bob.key }, [t.report(ada)]), 403],
      [await t.send({ learner: ada.learner }, [t.report(ada)]), 401],
      [await t.send({ learner: 'l999', key: ada.key }, [t.report(ada)]), 403],
    ];
    for (const [r, status] of cases) expect([r.status, r.text]).toEqual([status, status === 401 ? 'Unauthorized' : 'Forbidden']);
    expect((await stateOf(t)).learners.every((l) => Object.keys(l.lessons).length === 0)).toBe(true);
  });

  test('each learner is rate limited on their own: beyond the burst, 429 and nothing counted', async () => {
    const t = await start({ limits: { reportBurst: 3, reportRefillMs: 60000 } });
    const ada = (await t.join('Ada')).json;
    const bob = (await t.join('Bob')).json;
    for (let i = 0; i < 3; i++) expect((await t.send(ada, [t.report(ada)])).status).toBe(200);
    const limited = await t.send(ada, [t.report(ada)]);
    expect(limited.status).toBe(429);
    expect(Number(limited.headers['retry-after'])).toBeGreaterThan(0);
    expect((await t.send(bob, [t.report(bob)])).status).toBe(200);
    const rows = (await stateOf(t)).learners;
    expect(rows.find((r) => r.name === 'Ada').lessons.fork.reports).toBe(3);
    expect(rows.find((r) => r.name === 'Bob').lessons.fork.reports).toBe(1);
  });

  test('guessing the code is rate limited per address: new joins from it wait, the instructor does not', async () => {
    const t = await start({ limits: { authFailureBurst: 5, authFailureRefillMs: 60000 } });
    for (let i = 0; i < 5; i++) expect((await t.call('POST', '/api/join', { body: { name: `g${i}` }, code: `GUESS${i}` })).status).toBe(403);
    expect((await t.join('Ada')).status).toBe(429);
    expect((await t.instructor('/api/state')).status).toBe(200);
  });

  test('memory stays bounded: the history keeps the newest attempts, totals keep counting', async () => {
    const t = await start({ limits: { maxStoredAttempts: 5, reportBurst: 100 } });
    const ada = (await t.join('Ada')).json;
    const reports = Array.from({ length: 8 }, (_, i) => t.report(ada, { attempt: i + 1 }));
    await t.send(ada, reports);
    expect(t.classroom.store.state.history.map((h) => h.attempt)).toEqual([4, 5, 6, 7, 8]);
    expect((await stateOf(t)).learners[0].lessons.fork).toMatchObject({ reports: 8, attempts: 8 });
  });
});

describe('the instructor side', () => {
  test.each(['/api/state', '/api/export.csv', '/api/export.json', '/api/events'])('%s needs the instructor token: bare 401/403', async (path) => {
    const t = await start();
    const none = await t.call('GET', path, { code: null });
    const wrong = await t.call('GET', path, { code: null, token: 'f'.repeat(32) });
    const joinCode = await t.call('GET', `${path}?token=${t.classroom.store.joinCode}`, { code: null });
    expect([none.status, none.text]).toEqual([401, 'Unauthorized']);
    expect([wrong.status, wrong.text]).toEqual([403, 'Forbidden']);
    expect(joinCode.status).toBe(403);
  });

  test('the exports: CSV one row per learner and lesson, formulas defused; JSON with the history', async () => {
    const t = await start();
    const evil = (await t.join('=HYPERLINK("http://x","y"), z')).json;
    await t.send(evil, [t.report(evil)]);
    const csv = await t.instructor('/api/export.csv');
    expect(csv.status).toBe(200);
    expect(csv.headers['content-type']).toMatch(/text\/csv/);
    expect(csv.headers['content-disposition']).toMatch(/attachment; filename="?classroom-\d{4}-\d\d-\d\d\.csv/);
    const lines = csv.text.trim().split('\r\n');
    expect(lines).toHaveLength(1 + t.classroom.lessons.length);
    expect(lines[2]).toBe(`"'=HYPERLINK(""http://x"",""y""), z",2,fork,failing,1,,worker-count,1,${t.classroom.store.state.history[0].at},${(await stateOf(t)).learners[0].joinedAt}`);
    const json = await t.instructor('/api/export.json');
    expect(json.json.history).toEqual([expect.objectContaining({ name: '=HYPERLINK("http://x","y"), z', lesson: 'fork', failedStep: 'worker-count', attempt: 1 })]);
    expect(json.json.learners[0].lessons.fork.status).toBe('failing');
    expect(json.text).not.toContain(evil.key);
  });

  test('the page is served with a policy that forbids inline script', async () => {
    const t = await start();
    const page = await t.call('GET', '/', { code: null });
    expect(page.status).toBe(200);
    expect(page.text).toContain('<div id="grid" class="tiles">');
    expect(page.headers['content-security-policy']).toMatch(/script-src 'self'/);
    expect((await t.call('GET', '/insights.js', { code: null })).headers['content-type']).toMatch(/javascript/);
  });

  test('live updates: a dashboard gets a snapshot, then each report as an update', async () => {
    const t = await start();
    const events = [];
    const res = await new Promise((resolve, reject) => {
      http.get({ port: t.port, host: '127.0.0.1', path: `/api/events?token=${t.classroom.store.instructorToken}` }, resolve).on('error', reject);
    });
    let buffer = '';
    const arrived = (pred) =>
      new Promise((resolve, reject) => {
        const timer = setTimeout(() => reject(new Error(`no matching event; got ${JSON.stringify(events.map((e) => e.event))}`)), 10000);
        const check = () => {
          const e = events.find(pred);
          if (e) {
            clearTimeout(timer);
            res.off('data', check);
            resolve(e);
          }
        };
        res.on('data', check);
        check();
      });
    res.setEncoding('utf8');
    res.on('data', (chunk) => {
      buffer += chunk;
      let end;
      while ((end = buffer.indexOf('\n\n')) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const event = /^event: (.+)$/m.exec(block)?.[1];
        const data = /^data: (.+)$/m.exec(block)?.[1];
        if (event) events.push({ event, data: JSON.parse(data) });
      }
    });
    expect(res.headers['content-type']).toMatch(/text\/event-stream/);
    const snapshot = await arrived((e) => e.event === 'snapshot');
    expect(snapshot.data.learners).toEqual([]);
    const ada = (await t.join(XSS)).json;
    await t.send(ada, [t.report(ada)]);
    const update = await arrived((e) => e.event === 'update' && e.data.learners.some((l) => l.lessons.fork));
    expect(update.data.learners.find((l) => l.lessons.fork).name).toBe(XSS);
    res.destroy();
  });
});

describe('restarts', () => {
  test('a new server on the same state file has every acknowledged result, the same code and token', async () => {
    const t = await start();
    const ada = (await t.join('Ada')).json;
    await t.send(ada, [t.report(ada), t.report(ada, { lesson: 'bottleneck', passed: true, failedStep: null })]);
    const before = await stateOf(t);
    const { joinCode, instructorToken } = t.classroom.store;
    await t.classroom.close();
    open.length = 0;

    const again = await start();
    expect(again.classroom.store.resumed).toBe(true);
    expect([again.classroom.store.joinCode, again.classroom.store.instructorToken]).toEqual([joinCode, instructorToken]);
    expect((await stateOf(again)).learners).toEqual(before.learners);
    // The learner goes on with their key, and the same report id is still known.
    expect((await again.send(ada, [t.report(ada)])).status).toBe(200);
    expect(readdirSync(dir).filter((f) => f.endsWith('.tmp'))).toEqual([]);
  });

  test('after a crash: the journal is replayed once, a line cut short is dropped', async () => {
    const { ClassroomStore } = await import('../lib/classroom/store.js');
    const { copyFileSync, appendFileSync } = await import('node:fs');
    const t = await start();
    const ada = (await t.join('Ada')).json;
    for (let i = 0; i < 3; i++) await t.send(ada, [t.report(ada)]);
    const acknowledged = (await stateOf(t)).learners;
    // A copy of the files as a kill -9 would leave them: the snapshot from the
    // start, every acknowledged operation in the journal, and half a line.
    const crashed = joinPath(dir, 'crashed.json');
    copyFileSync(t.classroom.store.file, crashed);
    copyFileSync(t.classroom.store.journalFile, `${crashed}.journal`);
    appendFileSync(`${crashed}.journal`, '{"op":"reports","seq":99,"lear');
    const steps = new Map(t.classroom.lessons.map((l) => [l.id, Object.keys(l.steps)]));
    const replayed = ClassroomStore.open(crashed, { steps });
    expect(replayed.rows()).toEqual(acknowledged);
    // The half line was never acknowledged; it is set aside all the same.
    expect(replayed.warnings).toEqual([expect.stringMatching(/^1 unreadable line of .*crashed\.json\.journal skipped/)]);
    await replayed.start();
    // A snapshot written but the journal not yet emptied (a crash in between):
    // operations the snapshot holds are not applied twice.
    copyFileSync(t.classroom.store.journalFile, `${crashed}.journal`);
    expect(ClassroomStore.open(crashed, { steps }).rows()).toEqual(acknowledged);
    await replayed.close();
  });

  test('--new (fresh) starts another class and keeps the old file beside it', async () => {
    const t = await start();
    await t.join('Ada');
    const { joinCode } = t.classroom.store;
    await t.classroom.close();
    open.length = 0;
    const fresh = await start({ fresh: true });
    expect(fresh.classroom.store.joinCode).not.toBe(joinCode);
    expect((await stateOf(fresh)).learners).toEqual([]);
    expect(readdirSync(dir).filter((f) => /^class\.previous-\d+\.json$/.test(f))).toHaveLength(1);
  });

  test('an unreadable state file stops the start with what to do, and is left as it was', async () => {
    const { writeFileSync } = await import('node:fs');
    writeFileSync(joinPath(dir, 'class.json'), '{ not json');
    await expect(start()).rejects.toThrow(/could not be read.*--new/);
    expect(readFileSync(joinPath(dir, 'class.json'), 'utf8')).toBe('{ not json');
  });
});
