// No acknowledged result is ever lost. A real `cluster-workshop classroom`
// takes reports from 80 learners at once and is killed with SIGKILL in the
// middle of it, three times; before the last restart the journal is given
// the tail a power loss leaves (a line cut short, then a block of NUL bytes
// where data never reached the disk). After each restart every report the
// classroom answered 200 to is counted, and nothing it never received is.
import { appendFileSync, existsSync, mkdtempSync, readFileSync, rmSync, truncateSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import { startClassroomProcess } from './classroom-process.js';
import { request } from '../lib/harness/http.js';

const LEARNERS = 80;
const ROUNDS = 3;

let dir;
let running = null;

beforeAll(() => {
  dir = mkdtempSync(joinPath(tmpdir(), 'classroom-durable-'));
});

afterAll(async () => {
  await running?.stop('SIGKILL');
  rmSync(dir, { recursive: true, force: true });
});

test('kill -9 during reports, then a power-loss tail on the journal: every acknowledged report is there', async () => {
  running = await startClassroomProcess({ cwd: dir });
  const learners = [];
  for (let i = 0; i < LEARNERS; i++) {
    // Two addresses: a class behind two NATs (joins are limited per address).
    const from = i % 2 ? '127.0.0.2' : '127.0.0.1';
    const r = await request(running.port, '/api/join', { method: 'POST', localAddress: from, body: { name: `Learner ${i}` }, headers: { 'x-join-code': running.code } });
    expect(r.status).toBe(201);
    learners.push({ ...r.json, from, acknowledged: 0, sent: 0, lastAckedId: null });
  }
  let seq = 0;
  let acknowledged = 0;
  const journal = joinPath(dir, 'cluster-workshop-classroom.json.journal');

  for (let round = 1; round <= ROUNDS; round++) {
    const p = running;
    let killed = false;
    const loops = learners.map(async (l) => {
      while (!killed) {
        const id = `durable-${++seq}-${l.learner}`;
        l.sent += 1;
        const r = await request(p.port, '/api/reports', {
          method: 'POST',
          localAddress: l.from,
          timeoutMs: 3000,
          headers: { 'x-join-code': p.code },
          body: { learner: l.learner, key: l.key, reports: [{ id, lesson: 'fork', passed: false, failedStep: 'worker-count', durationMs: 100, attempt: l.sent, at: new Date().toISOString() }] },
        });
        if (r.status === 200 && r.json.accepted === 1) {
          l.acknowledged += 1;
          acknowledged += 1;
          l.lastAckedId = id;
        }
        if (r.status === 429) await new Promise((res) => setTimeout(res, 200));
      }
    });
    // Kill once a good number of reports were acknowledged in this round (a bounded poll).
    const target = acknowledged + 300;
    const deadline = Date.now() + 30000;
    while (acknowledged < target && Date.now() < deadline) await new Promise((res) => setTimeout(res, 5));
    await p.stop('SIGKILL');
    killed = true;
    await Promise.all(loops);

    if (round === ROUNDS) {
      // The power-loss tail: keep every line up to the last acknowledged
      // report, cut the next line in half, then a block of zeros.
      const text = readFileSync(journal, 'utf8');
      const lastAcked = Math.max(...learners.map((l) => (l.lastAckedId ? text.indexOf(`"id":"${l.lastAckedId}"`) : -1)));
      const endOfLine = text.indexOf('\n', lastAcked) + 1;
      const next = text.indexOf('\n', endOfLine);
      truncateSync(journal, Buffer.byteLength(text.slice(0, next > endOfLine ? endOfLine + Math.floor((next - endOfLine) / 2) : endOfLine)));
      appendFileSync(journal, Buffer.alloc(4096));
    }

    running = await startClassroomProcess({ cwd: dir });
    expect(running.code).toBe(p.code);
    const rows = (await request(running.port, '/api/state', { headers: { authorization: `Bearer ${running.token}` } })).json.learners;
    const byId = new Map(rows.map((r) => [r.id, r.lessons.fork?.reports ?? 0]));
    const lost = learners.reduce((n, l) => n + Math.max(0, l.acknowledged - byId.get(l.learner)), 0);
    const invented = learners.filter((l) => byId.get(l.learner) > l.sent).length;
    console.log(`durability round ${round}${round === ROUNDS ? ' (with a power-loss tail)' : ''}: ${acknowledged} reports acknowledged so far, ${lost} lost`);
    expect(lost).toBe(0);
    expect(invented).toBe(0);
    expect(rows).toHaveLength(LEARNERS);
  }
  expect(running.output).toMatch(/unreadable lines? of .*journal skipped/);
  expect(existsSync(joinPath(dir, 'cluster-workshop-classroom.json.corrupt'))).toBe(true);
});
