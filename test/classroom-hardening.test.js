// The classroom against someone who can read the projected join code, and
// against the disk: one owner per state file, a journal that survives a bad
// line, a state file checked as strictly as a report, joins limited per
// address, real step ids only, guesses that lock out no instructor and no
// learner already in, streams that cannot grow the server, and the server's
// clock. Issue 14, items 1-8 and 11 (server side).
import { copyFileSync, existsSync, mkdirSync, mkdtempSync, readFileSync, readdirSync, rmSync, writeFileSync, appendFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import net from 'node:net';
import { createClassroom } from '../lib/classroom/server.js';
import { request } from '../lib/harness/http.js';

let dir;
const open = [];

beforeEach(() => {
  dir = mkdtempSync(joinPath(tmpdir(), 'classroom-hard-'));
});

afterEach(async () => {
  for (const c of open.splice(0)) await c.close();
  rmSync(dir, { recursive: true, force: true });
});

async function start(options = {}) {
  const classroom = await createClassroom({ stateFile: joinPath(dir, 'class.json'), title: 'Hardening', ...options });
  open.push(classroom);
  const { port } = await classroom.listen(0, '127.0.0.1');
  const call = (method, path, { body, code = classroom.store.joinCode, token, headers = {}, from } = {}) =>
    request(port, path, {
      method,
      body,
      localAddress: from,
      headers: { ...(code && { 'x-join-code': code }), ...(token && { authorization: `Bearer ${token}` }), ...headers },
    });
  const instructor = (method, path, body) => call(method, path, { body, code: null, token: classroom.store.instructorToken });
  const join = (name, from) => call('POST', '/api/join', { body: { name }, from });
  let n = 0;
  const report = (fields = {}) => ({ id: `hard-${String(++n).padStart(4, '0')}`, lesson: 'fork', passed: false, failedStep: 'worker-count', durationMs: 900, attempt: n, at: new Date().toISOString(), ...fields });
  const send = (learner, reports, opts) => call('POST', '/api/reports', { body: { learner: learner.learner, key: learner.key, reports }, ...opts });
  const rows = async () => (await instructor('GET', '/api/state')).json.learners;
  return { classroom, port, call, instructor, join, report, send, rows };
}

/** Every file in the folder with its bytes: what "changes nothing on disk" compares. */
const disk = () => Object.fromEntries(readdirSync(dir).map((f) => [f, readFileSync(joinPath(dir, f), 'latin1')]));

/** A copy of a running class's files, as kill -9 would leave them. */
function crashCopy(t, name = 'crashed.json') {
  const file = joinPath(dir, name);
  copyFileSync(t.classroom.store.file, file);
  copyFileSync(t.classroom.store.journalFile, `${file}.journal`);
  return file;
}

describe('1. one state file, one owner', () => {
  test('a second classroom on the same state file refuses, naming the holder pid and port, and changes nothing', async () => {
    const t = await start();
    const ada = (await t.join('Ada')).json;
    await t.send(ada, [t.report()]);
    const before = disk();
    await expect(createClassroom({ stateFile: joinPath(dir, 'class.json') })).rejects.toThrow(new RegExp(`in use by another classroom \\(pid ${process.pid}, port ${t.port}\\)`));
    expect(disk()).toEqual(before);
    // The first one still journals what it acknowledges.
    expect((await t.send(ada, [t.report()])).status).toBe(200);
    // join, report, report: every acknowledged operation is in its journal.
    expect(readFileSync(t.classroom.store.journalFile, 'utf8').trim().split('\n')).toHaveLength(3);
  });

  test('a start whose listen fails (port taken) changes nothing on disk, not even a crashed class journal', async () => {
    const t = await start();
    const ada = (await t.join('Ada')).json;
    for (let i = 0; i < 3; i++) await t.send(ada, [t.report()]);
    const file = crashCopy(t);
    const before = disk();
    const second = await createClassroom({ stateFile: file });
    await expect(second.listen(t.port, '127.0.0.1')).rejects.toThrow(/EADDRINUSE/);
    await second.close();
    expect(disk()).toEqual(before);
    // And a brand-new class that cannot listen leaves no file behind.
    const fresh = await createClassroom({ stateFile: joinPath(dir, 'never.json') });
    await expect(fresh.listen(t.port, '127.0.0.1')).rejects.toThrow(/EADDRINUSE/);
    await fresh.close();
    expect(disk()).toEqual(before);
  });

  test('a lock left by a process that is gone (kill -9) does not stop the next start', async () => {
    const t = await start();
    await t.join('Ada');
    const file = crashCopy(t);
    // The highest pid Linux hands out is below 2^22: this one is not running.
    writeFileSync(`${file}.lock`, JSON.stringify({ pid: 4194304 + 7, port: 1 }));
    const again = await createClassroom({ stateFile: file });
    open.push(again);
    await again.listen(0, '127.0.0.1');
    expect(again.store.learnerCount).toBe(1);
  });
});

describe('2. journal recovery keeps going past a bad line', () => {
  test('a garbage line and a line of NUL bytes are kept in .corrupt; every operation around them is replayed', async () => {
    const t = await start();
    const ada = (await t.join('Ada')).json;
    await t.send(ada, [t.report()]);
    const file = crashCopy(t);
    appendFileSync(`${file}.journal`, 'garbage that is not JSON\n\0\0\0\0\0\0\0\0\n');
    await t.send(ada, [t.report({ passed: true, failedStep: null })]);
    const bob = (await t.join('Bob')).json;
    await t.send(bob, [t.report()]);
    // The lines after the bad ones, as the running class journaled them.
    const all = readFileSync(t.classroom.store.journalFile, 'utf8').trim().split('\n');
    appendFileSync(`${file}.journal`, `${all.slice(2).join('\n')}\n`);
    const acknowledged = await t.rows();

    const again = await createClassroom({ stateFile: file });
    open.push(again);
    await again.listen(0, '127.0.0.1');
    expect(again.store.rows()).toEqual(acknowledged);
    expect(again.store.warnings.join('\n')).toMatch(/2 unreadable lines? of .*crashed\.json\.journal .*kept in .*crashed\.json\.corrupt/);
    const corrupt = readFileSync(`${file}.corrupt`, 'latin1');
    expect(corrupt).toContain('garbage that is not JSON');
    expect(corrupt).toContain('\0\0\0\0');
  });

  test('a journal operation that parses but is malformed (reports: null) is skipped and kept, not a crash', async () => {
    const t = await start();
    const ada = (await t.join('Ada')).json;
    await t.send(ada, [t.report()]);
    const file = crashCopy(t);
    appendFileSync(`${file}.journal`, `${JSON.stringify({ op: 'reports', seq: 50, learner: ada.learner, receivedAt: new Date().toISOString(), reports: null })}\n`);
    const again = await createClassroom({ stateFile: file });
    open.push(again);
    await again.listen(0, '127.0.0.1');
    expect(again.store.rows()[0].lessons.fork.reports).toBe(1);
    expect(readFileSync(`${file}.corrupt`, 'utf8')).toContain('"reports":null');
  });
});

describe('3. a damaged state file: a clear message, nothing changed', () => {
  const good = () => ({
    version: 1,
    title: 'T',
    createdAt: new Date().toISOString(),
    joinCode: 'ABCDEF',
    instructorToken: 'a'.repeat(32),
    nextLearner: 2,
    seq: 1,
    learners: { l1: { id: 'l1', name: 'Ada', keyHash: 'b'.repeat(64), joinedAt: new Date().toISOString(), lastReportAt: null, lastProgressAt: new Date().toISOString(), lastLesson: null, lessons: {}, recentIds: [] } },
    history: [],
  });
  test.each([
    ['learners is null', (s) => (s.learners = null), /learners/],
    ['a learner has no name', (s) => delete s.learners.l1.name, /learner l1.*name/],
    ['the join code and token are missing', (s) => (delete s.joinCode, delete s.instructorToken), /join code/],
    ['a lesson total is not a number', (s) => (s.learners.l1.lessons.fork = { reports: 'x' }), /learner l1.*fork/],
  ])('%s: StateFileError naming what is wrong, files untouched', async (_, damage, message) => {
    const s = good();
    damage(s);
    writeFileSync(joinPath(dir, 'class.json'), JSON.stringify(s));
    const before = disk();
    const err = await createClassroom({ stateFile: joinPath(dir, 'class.json') }).catch((e) => e);
    expect(err.name).toBe('StateFileError');
    expect(err.message).toMatch(message);
    expect(err.message).toMatch(/--new/);
    expect(disk()).toEqual(before);
  });

  test('a journal path that is a folder: StateFileError, not a crash', async () => {
    writeFileSync(joinPath(dir, 'class.json'), JSON.stringify(good()));
    mkdirSync(joinPath(dir, 'class.json.journal'));
    const err = await createClassroom({ stateFile: joinPath(dir, 'class.json') }).catch((e) => e);
    expect(err.name).toBe('StateFileError');
    expect(err.message).toMatch(/journal .* is not a file/);
  });
});

describe('4. joins limited per address; the instructor removes, renames and lets a learner back in', () => {
  test('a class of 30 behind one address joins; a flood from it is cut off, another address still joins', async () => {
    const t = await start();
    for (let i = 0; i < 30; i++) expect((await t.join(`Learner ${i}`)).status).toBe(201);
    let refused = 0;
    for (let i = 0; i < 100 && !refused; i++) if ((await t.join(`Flood ${i}`)).status === 429) refused += 1;
    expect(refused).toBe(1);
    expect((await t.join('Latecomer', '127.0.0.2')).status).toBe(201);
    expect((await t.rows()).length).toBeLessThan(130);
  });

  test('remove: the learner disappears, their key is refused, their name is free again', async () => {
    const t = await start();
    const ada = (await t.join('Ada')).json;
    await t.send(ada, [t.report()]);
    expect((await t.instructor('DELETE', `/api/learners/${ada.learner}`)).status).toBe(200);
    expect(await t.rows()).toEqual([]);
    expect((await t.send(ada, [t.report()])).status).toBe(403);
    expect((await t.join('Ada')).status).toBe(201);
    // A learner id that does not exist, or one from the prototype: 404.
    expect((await t.instructor('DELETE', '/api/learners/l999')).status).toBe(404);
    expect((await t.instructor('DELETE', '/api/learners/constructor')).status).toBe(404);
  });

  test('rename: checked like a join (400 invalid, 409 taken), shown at once', async () => {
    const t = await start();
    const ada = (await t.join('Ada')).json;
    await t.join('Bob');
    expect((await t.instructor('PATCH', `/api/learners/${ada.learner}`, { name: 'bob' })).status).toBe(409);
    expect((await t.instructor('PATCH', `/api/learners/${ada.learner}`, { name: 'A\u202Eda' })).status).toBe(400);
    expect((await t.instructor('PATCH', `/api/learners/${ada.learner}`, { name: 'Ada Lovelace' })).status).toBe(200);
    expect((await t.rows()).map((r) => r.name).sort()).toEqual(['Ada Lovelace', 'Bob']);
  });

  test('a learner who lost classroom.json joins again under their name once the instructor allows it: one row, results kept', async () => {
    const t = await start();
    const ada = (await t.join('Ada')).json;
    await t.send(ada, [t.report()]);
    const refused = await t.join('Ada');
    expect(refused.status).toBe(409);
    expect(refused.json.error).toMatch(/instructor/);
    expect((await t.instructor('POST', `/api/learners/${ada.learner}/rejoin`)).status).toBe(200);
    const back = await t.join('ada');
    expect(back.status).toBe(201);
    expect(back.json.learner).toBe(ada.learner);
    expect((await t.send(ada, [t.report()])).status).toBe(403);
    expect((await t.send(back.json, [t.report()])).status).toBe(200);
    const rows = await t.rows();
    expect(rows).toHaveLength(1);
    expect(rows[0].lessons.fork.reports).toBe(2);
    // Allowed once: a third join under the name is refused again.
    expect((await t.join('Ada')).status).toBe(409);
    // All of it survives a restart.
    await t.classroom.close();
    open.length = 0;
    const again = await start();
    expect(again.classroom.store.rows()).toEqual(rows);
    expect((await again.send(back.json, [again.report({ id: 'after-restart-1' })])).status).toBe(200);
  });
});

describe('5. only the lesson\'s real step ids', () => {
  test.each([
    ['constructor', 'constructor'],
    ['__proto__', '__proto__'],
    ['a made-up 64-character id', 'x'.repeat(64)],
    ['a step of another lesson', 'empty-config'],
  ])('a failed step that is %s gets 400 and changes nothing', async (_, failedStep) => {
    const t = await start();
    const ada = (await t.join('Ada')).json;
    const r = await t.send(ada, [t.report({ failedStep })]);
    expect(r.status).toBe(400);
    expect(r.json.error).toMatch(/not a step of lesson fork/);
    expect((await t.rows())[0].lessons).toEqual({});
  });

  test('every real step of a lesson is accepted and counted as a number', async () => {
    const t = await start({ limits: { reportBurst: 100 } });
    const ada = (await t.join('Ada')).json;
    const steps = t.classroom.lessons.find((l) => l.id === 'fork').steps;
    for (const step of Object.keys(steps)) expect((await t.send(ada, [t.report({ failedStep: step })])).status).toBe(200);
    const fails = (await t.rows())[0].lessons.fork.fails;
    expect(Object.values(fails).every((n) => n === 1)).toBe(true);
    expect(Object.keys(fails).sort()).toEqual(Object.keys(steps).sort());
  });
});

describe('6. wrong guesses lock out nobody who holds a real secret', () => {
  const lim = { authFailureBurst: 5, authFailureRefillMs: 60000 };
  test('after wrong codes from an address: the instructor and learners already in go on; only new joins wait', async () => {
    const t = await start({ limits: lim });
    const ada = (await t.join('Ada')).json;
    for (let i = 0; i < 8; i++) await t.call('POST', '/api/join', { body: { name: `g${i}` }, code: `GUESS${i}` });
    expect((await t.join('Bob')).status).toBe(429);
    expect((await t.instructor('GET', '/api/state')).status).toBe(200);
    expect((await t.send(ada, [t.report()])).status).toBe(200);
    const events = await t.call('HEAD', '/api/events', { code: null, token: t.classroom.store.instructorToken });
    expect(events.status).toBe(200);
  });

  test('the same stale code sent again and again is one wrong guess, not many', async () => {
    const t = await start({ limits: lim });
    for (let i = 0; i < 20; i++) expect((await t.call('POST', '/api/join', { body: { name: 'Ada' }, code: 'OLDONE' })).status).toBe(403);
    expect((await t.join('Ada')).status).toBe(201);
  });

  test('a report or join sent as text/plain gets 415 and is not a guess', async () => {
    const t = await start({ limits: lim });
    for (let i = 0; i < 10; i++) {
      const r = await t.call('POST', '/api/reports', { body: '{"learner":"l1"}', headers: { 'content-type': 'text/plain' } });
      expect(r.status).toBe(415);
    }
    expect((await t.join('Ada')).status).toBe(201);
  });

  test('wrong instructor tokens from an address do not lock out the right one', async () => {
    const t = await start({ limits: lim });
    for (let i = 0; i < 10; i++) await t.call('GET', '/api/state', { code: null, token: 'f'.repeat(32) });
    expect((await t.instructor('GET', '/api/state')).status).toBe(200);
  });
});

describe('7. dashboards that stop reading', () => {
  test('stalled streams never take the instructor\'s slot: a new dashboard always gets in', async () => {
    const t = await start({ limits: { maxDashboards: 2 } });
    const stalled = [];
    for (let i = 0; i < 4; i++) {
      const s = net.connect(t.port, '127.0.0.1');
      s.pause(); // never reads
      s.write(`GET /api/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.classroom.store.instructorToken}\r\n\r\n`);
      stalled.push(s);
    }
    try {
      const stats = async () => (await t.instructor('GET', '/api/stats')).json;
      // Bounded poll: the four stalled requests reach the server.
      let s;
      for (let i = 0; i < 500 && (s = await stats()).dashboards < 2; i++) await new Promise((r) => setTimeout(r, 10));
      expect(s.dashboards).toBe(2);
      const r = await new Promise((resolve, reject) => {
        const req = net.connect(t.port, '127.0.0.1');
        let got = '';
        req.on('data', (d) => {
          got += d;
          // Either the stream begins (a snapshot) or a refusal comes whole.
          if (got.includes('event: snapshot') || (got.includes('\r\n\r\n') && !got.startsWith('HTTP/1.1 200'))) {
            req.destroy();
            resolve(got);
          }
        });
        req.on('error', reject);
        req.write(`GET /api/events HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${t.classroom.store.instructorToken}\r\n\r\n`);
      });
      expect(r).toMatch(/^HTTP\/1\.1 200/);
      expect((await stats()).dashboards).toBeLessThanOrEqual(2);
    } finally {
      for (const s of stalled) s.destroy();
    }
  });

  test('a stream that buffers more than its bound is dropped (the browser reconnects and resyncs)', async () => {
    const { DashboardStreams } = await import('../lib/classroom/streams.js');
    const fake = (stalled) => {
      const res = { writableLength: 0, ended: false, destroyed: false, writes: 0 };
      res.write = (s) => {
        res.writes += 1;
        if (stalled) res.writableLength += s.length;
        return !stalled;
      };
      res.destroy = () => (res.destroyed = true);
      res.end = () => (res.ended = true);
      return res;
    };
    const streams = new DashboardStreams({ max: 3, maxBufferedBytes: 10000 });
    const reading = fake(false);
    const slow = fake(true);
    streams.add(reading);
    streams.add(slow);
    for (let i = 0; i < 100; i++) streams.broadcast('x'.repeat(1000));
    expect(slow.destroyed).toBe(true);
    expect(slow.writableLength).toBeLessThanOrEqual(11000);
    expect(reading.destroyed).toBe(false);
    expect(reading.writes).toBe(100);
    expect(streams.size).toBe(1);
    expect(streams.dropped).toBe(1);
    // The snapshot a stream got on connecting (a large class, a slow link) is allowed on top.
    const late = fake(true);
    late.writableLength = 50000;
    streams.add(late, 50000);
    for (let i = 0; i < 10; i++) streams.broadcast('x'.repeat(1000));
    expect(late.destroyed).toBe(false);
    for (let i = 0; i < 2; i++) streams.broadcast('x'.repeat(1000));
    expect(late.destroyed).toBe(true);
  });
});

describe('8. the server\'s clock decides', () => {
  test('a learner clock 10 minutes ahead: accepted, stamped with the server time', async () => {
    let clock = Date.parse('2026-01-05T10:00:00Z');
    const t = await start({ now: () => clock });
    const ada = (await t.join('Ada')).json;
    clock += 60000;
    const r = await t.send(ada, [t.report({ at: new Date(clock + 10 * 60000).toISOString() })]);
    expect(r.status).toBe(200);
    const row = (await t.rows())[0];
    expect(row.lessons.fork.lastAt).toBe(new Date(clock).toISOString());
    expect(t.classroom.store.state.history[0]).toMatchObject({ receivedAt: new Date(clock).toISOString(), sentAt: new Date(clock + 10 * 60000).toISOString() });
  });

  test('a learner clock an hour behind: the pass counts now, after the join, and they are not stuck', async () => {
    const { stuckReasons } = await import('../lib/classroom/public/insights.js');
    let clock = Date.parse('2026-01-05T10:00:00Z');
    const t = await start({ now: () => clock });
    const ada = (await t.join('Ada')).json;
    clock += 12 * 60000;
    await t.send(ada, [t.report({ passed: true, failedStep: null, at: new Date(clock - 3600000).toISOString() })]);
    const row = (await t.rows())[0];
    expect(row.lessons.fork.passedAt).toBe(new Date(clock).toISOString());
    expect(stuckReasons(row, { now: clock + 60000, minutes: 10, lessons: t.classroom.lessons })).toEqual([]);
  });
});

describe('11. smaller', () => {
  test('the CSV starts with a UTF-8 byte-order mark (Excel reads Zoë and 李小龙)', async () => {
    const t = await start();
    await t.join('Zoë');
    const bytes = await new Promise((resolve) => {
      import('node:http').then(({ default: http }) =>
        http.get({ port: t.port, host: '127.0.0.1', path: '/api/export.csv', headers: { authorization: `Bearer ${t.classroom.store.instructorToken}` } }, (res) => {
          const chunks = [];
          res.on('data', (c) => chunks.push(c));
          res.on('end', () => resolve(Buffer.concat(chunks)));
        }),
      );
    });
    expect([...bytes.subarray(0, 3)]).toEqual([0xef, 0xbb, 0xbf]);
    expect(bytes.toString('utf8')).toContain('Zoë');
  });

  test('HEAD /api/events answers at once', async () => {
    const t = await start();
    const r = await t.call('HEAD', '/api/events', { code: null, token: t.classroom.store.instructorToken });
    expect(r.ok).toBe(true);
    expect(r.status).toBe(200);
    expect(r.headers['content-type']).toMatch(/text\/event-stream/);
  });

  test('Zalgo names are refused; emoji joined with ZWJ are accepted', async () => {
    const t = await start();
    expect((await t.join('Z\u0351\u0352\u0353\u0354\u0355a\u0356\u0357\u0358lgo')).status).toBe(400);
    expect((await t.join('Ada 👩‍💻')).status).toBe(201);
    expect((await t.join('👨‍👩‍👧')).status).toBe(201);
    expect((await t.join('Ngọc Ánh')).status).toBe(201);
    expect((await t.join('Ada\u200D')).status).toBe(400);
  });
});

test('the classroom loads nothing from the harness', async () => {
  const { readdirSync: list } = await import('node:fs');
  const root = new URL('../lib/classroom/', import.meta.url);
  const files = list(root, { recursive: true }).filter((f) => f.endsWith('.js'));
  for (const f of files) expect([f, readFileSync(new URL(f, root), 'utf8')]).not.toEqual([f, expect.stringMatching(/from '\.\.\/harness\//)]);
  expect(existsSync(new URL('client.js', root))).toBe(true);
});

describe('10. "stuck" counts from the last progress, not from joining', () => {
  test('a learner whose verifies get further is not idle; one whose do not is', async () => {
    const { stuckReasons } = await import('../lib/classroom/public/insights.js');
    let clock = Date.parse('2026-01-05T10:00:00Z');
    const t = await start({ now: () => clock });
    const ada = (await t.join('Ada')).json;
    const bob = (await t.join('Bob')).json;
    clock += 2 * 60000;
    await t.send(ada, [t.report({ failedStep: 'worker-count' })]);
    await t.send(bob, [t.report({ failedStep: 'all-workers-answer' })]);
    clock += 3 * 60000;
    // Ada gets further (a later step fails now); Bob falls back to an earlier step.
    await t.send(ada, [t.report({ failedStep: 'all-workers-answer' })]);
    await t.send(bob, [t.report({ failedStep: 'worker-count' })]);
    clock += 6 * 60000; // 11 minutes after joining
    const rows = await t.rows();
    const stuck = (name) => stuckReasons(rows.find((r) => r.name === name), { now: clock, minutes: 8, lessons: t.classroom.lessons });
    expect(stuck('Ada')).toEqual([]);
    expect(stuck('Bob')).toEqual([{ kind: 'idle', minutes: 9 }]);
  });
});
