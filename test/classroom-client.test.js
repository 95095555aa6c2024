// The learner's side: join and leave through the real CLI, where the join
// file goes, and reporting after verify: sent when the classroom answers,
// queued (within a short budget, exit code unchanged) when it does not, and
// sent later in order.
import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync, existsSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join as joinPath } from 'node:path';
import net from 'node:net';
import { main } from '../lib/cli/main.js';
import { createClassroom } from '../lib/classroom/server.js';
import { reportVerify, loadJoin, REPORT_BUDGET_MS } from '../lib/classroom/client.js';
import { PACKAGE_ROOT } from '../lib/manifest.js';
import { runCli } from './helpers/cli.js';

let dir;
let env;
const cleanups = [];

beforeEach(() => {
  dir = mkdtempSync(joinPath(tmpdir(), 'classroom-client-'));
  // A home of its own: nothing is read from or written to the real config folder.
  env = { ...process.env, HOME: joinPath(dir, 'home'), XDG_CONFIG_HOME: joinPath(dir, 'config'), CLUSTER_WORKSHOP_DIR: '' };
  delete env.CLUSTER_WORKSHOP_DIR;
});

afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
  rmSync(dir, { recursive: true, force: true });
});

async function classroom(options = {}) {
  const c = await createClassroom({ stateFile: joinPath(dir, 'class.json'), title: 'Client test', ...options });
  const { port } = await c.listen(options.port ?? 0, '127.0.0.1');
  cleanups.push(() => c.close());
  return { c, url: `http://127.0.0.1:${port}`, port };
}

async function cli(args, { cwd = dir } = {}) {
  let out = '';
  let err = '';
  const io = { out: (s) => (out += s), err: (s) => (err += s), stdout: { isTTY: false }, env, cwd, interactive: () => false };
  const code = await main(args, io);
  return { code, out, err };
}

/** A server that accepts connections and never answers: a classroom that hangs. */
async function hangingServer() {
  const sockets = new Set();
  const server = net.createServer((s) => sockets.add(s));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  cleanups.push(
    () =>
      new Promise((resolve) => {
        for (const s of sockets) s.destroy();
        server.close(resolve);
      }),
  );
  return `http://127.0.0.1:${server.address().port}`;
}

const failedReport = { passed: false, durationMs: 1500, steps: [{ id: 'starts', passed: true }, { id: 'worker-count', passed: false }] };
const passedReport = { passed: true, durationMs: 2500, steps: [{ id: 'starts', passed: true }, { id: 'worker-count', passed: true }] };
const io = () => ({ env, cwd: dir, err: () => {} });

test('join saves to the config folder without a workspace, and verify reports there', async () => {
  const { c, url } = await classroom();
  const r = await cli(['join', url, '--code', c.store.joinCode.toLowerCase(), '--name', 'Ada Lovelace']);
  expect(r).toMatchObject({ code: 0, err: '' });
  expect(r.out).toContain('You joined "Client test" as Ada Lovelace');
  const file = joinPath(dir, 'config', 'cluster-workshop', 'classroom.json');
  expect(r.out).toContain(file);
  expect(JSON.parse(readFileSync(file, 'utf8'))).toMatchObject({ url, name: 'Ada Lovelace', queue: [] });

  let said = '';
  const outcome = await reportVerify({ lesson: 'fork', report: failedReport, attempts: 2, io: { env, cwd: dir, err: (s) => (said += s) } });
  expect(outcome).toMatchObject({ outcome: 'sent', queued: 0 });
  expect(said).toMatch(/^classroom: result sent/);
  const row = c.store.rows()[0];
  expect(row.lessons.fork).toMatchObject({ attempts: 2, lastFailedStep: 'worker-count' });
  expect(c.store.state.history[0]).toMatchObject({ lesson: 'fork', passed: false, failedStep: 'worker-count', durationMs: 1500, attempt: 2 });
});

test('with a workspace folder the join file goes inside it, and is found there first', async () => {
  const { c, url } = await classroom();
  mkdirSync(joinPath(dir, 'cluster-workshop'));
  expect((await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada'])).code).toBe(0);
  expect(existsSync(joinPath(dir, 'cluster-workshop', 'classroom.json'))).toBe(true);
  expect(existsSync(joinPath(dir, 'config', 'cluster-workshop', 'classroom.json'))).toBe(false);
  expect(loadJoin({ env, cwd: dir }).file).toBe(joinPath(dir, 'cluster-workshop', 'classroom.json'));
});

test('joining the same class again under the same name keeps the learner, and moves the join into a new workspace', async () => {
  const { c, url } = await classroom();
  await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  await reportVerify({ lesson: 'fork', report: failedReport, attempts: 1, io: io() });
  mkdirSync(joinPath(dir, 'cluster-workshop'));
  const again = await cli(['join', url, '--code', c.store.joinCode, '--name', 'ada']);
  expect(again.code).toBe(0);
  expect(again.out).toMatch(/already in "Client test" as Ada/);
  expect(c.store.learnerCount).toBe(1);
  expect(existsSync(joinPath(dir, 'config', 'cluster-workshop', 'classroom.json'))).toBe(false);
  expect(loadJoin({ env, cwd: dir })).toMatchObject({ file: joinPath(dir, 'cluster-workshop', 'classroom.json'), info: { attempts: { fork: 1 } } });
  expect((await reportVerify({ lesson: 'fork', report: failedReport, attempts: 1, io: io() })).outcome).toBe('sent');
  expect(c.store.rows()[0].lessons.fork.attempts).toBe(2);
});

test('an unwritable place for the join file: a clear message, exit 1, and nobody joined', async () => {
  const { c, url } = await classroom();
  writeFileSync(joinPath(dir, 'not-a-folder'), '');
  env.XDG_CONFIG_HOME = joinPath(dir, 'not-a-folder');
  const r = await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  expect(r.code).toBe(1);
  expect(r.err).toMatch(/Cannot save your classroom file in .*not-a-folder.*\(ENOTDIR\)\. Make that folder writable/);
  expect(c.store.learnerCount).toBe(0);
});

test.each([
  ['no address', ['join', '--code', 'X', '--name', 'A'], 2, /classroom address/],
  ['no code', ['join', 'http://127.0.0.1:1', '--name', 'A'], 2, /--code/],
  ['no name', ['join', 'http://127.0.0.1:1', '--code', 'X'], 2, /--name/],
  ['a name with a newline', ['join', 'http://127.0.0.1:1', '--code', 'X', '--name', 'A\nB'], 2, /--name: name may hold/],
  ['an https address', ['join', 'https://127.0.0.1:1', '--code', 'X', '--name', 'A'], 1, /must start with http:\/\//],
  // Port 9 is closed here, and one fetch refuses: either way the learner reads why.
  ['nothing listening', ['join', 'http://127.0.0.1:9', '--code', 'X', '--name', 'A'], 1, /Could not join: could not reach .*(connection refused|port 9 is one that browsers and fetch refuse)/],
])('join with %s says what to do', async (_, args, code, message) => {
  const r = await cli(args);
  expect(r.code).toBe(code);
  expect(r.err).toMatch(message);
});

test('join with a wrong code or a taken name says so', async () => {
  const { c, url } = await classroom();
  expect((await cli(['join', url, '--code', 'WRONG1', '--name', 'Ada'])).err).toMatch(/refused the join code "WRONG1"/);
  await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  rmSync(joinPath(dir, 'config'), { recursive: true });
  const taken = await cli(['join', url, '--code', c.store.joinCode, '--name', 'ada']);
  expect(taken.code).toBe(1);
  expect(taken.err).toMatch(/already called "ada"/);
});

test('a classroom that does not answer: the result is queued within the budget, then sent in order with the next', async () => {
  const { c, url, port } = await classroom();
  await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  const file = loadJoin({ env, cwd: dir }).file;
  // Point the join at a classroom that accepts connections and never answers.
  const info = JSON.parse(readFileSync(file, 'utf8'));
  writeFileSync(file, JSON.stringify({ ...info, url: await hangingServer() }));

  const started = Date.now();
  const queued = await reportVerify({ lesson: 'fork', report: failedReport, attempts: 1, io: io() });
  const elapsed = Date.now() - started;
  expect(queued).toMatchObject({ outcome: 'unreachable', queued: 1 });
  expect(queued.message).toMatch(/no answer from .* within \d+ ms; 1 result\(s\) queued/);
  // Bounded by the budget (with a margin for a loaded machine), not by the classroom.
  expect(elapsed).toBeLessThan(REPORT_BUDGET_MS + 2000);
  expect(c.store.rows()[0].lessons).toEqual({});

  // Back to the real classroom: the queued result goes first, then the new one.
  writeFileSync(file, JSON.stringify({ ...JSON.parse(readFileSync(file, 'utf8')), url: `http://127.0.0.1:${port}` }));
  const sent = await reportVerify({ lesson: 'fork', report: passedReport, attempts: 2, io: io() });
  expect(sent).toMatchObject({ outcome: 'sent', queued: 0, sent: 2 });
  expect(c.store.state.history.map((h) => [h.attempt, h.passed])).toEqual([
    [1, false],
    [2, true],
  ]);
  expect(c.store.rows()[0].lessons.fork).toMatchObject({ attempts: 2, passedAt: expect.any(String), streak: 0 });
  expect(JSON.parse(readFileSync(file, 'utf8')).queue).toEqual([]);
});

test('a classroom that refuses the join (a new class) keeps the results and says to join again', async () => {
  const { c, url } = await classroom();
  await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  c.store.state.joinCode = 'NEWONE';
  const r = await reportVerify({ lesson: 'fork', report: failedReport, attempts: 1, io: io() });
  expect(r).toMatchObject({ outcome: 'refused', queued: 1 });
  expect(r.message).toMatch(/Run cluster-workshop join again/);
});

test('attempt counts continue from the join file when progress has none (verify outside a workspace)', async () => {
  const { c, url } = await classroom();
  await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  for (let i = 0; i < 3; i++) await reportVerify({ lesson: 'fork', report: failedReport, attempts: 1, io: io() });
  expect(c.store.state.history.map((h) => h.attempt)).toEqual([1, 2, 3]);
  expect(c.store.rows()[0].lessons.fork.streak).toBe(3);
});

test('reporting never throws, whatever the join file holds', async () => {
  mkdirSync(joinPath(dir, 'config', 'cluster-workshop'), { recursive: true });
  writeFileSync(joinPath(dir, 'config', 'cluster-workshop', 'classroom.json'), '{ broken');
  let said = '';
  const r = await reportVerify({ lesson: 'fork', report: failedReport, attempts: 1, io: { env, cwd: dir, err: (s) => (said += s) } });
  expect(r.outcome).toBe('error');
  expect(said).toMatch(/could not be read.*join again/);
  expect(await reportVerify({ lesson: 'fork', report: {}, attempts: 'x', io: { env: { HOME: '/nonexistent' }, cwd: '/nonexistent' } })).toBe(null);
});

test('leave sends what is queued if it can, removes the join, and verify reports nowhere after', async () => {
  const { c, url } = await classroom();
  await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  const r = await cli(['leave']);
  expect(r.code).toBe(0);
  expect(r.out).toMatch(/You left "Client test"; verify no longer reports/);
  expect(loadJoin({ env, cwd: dir })).toBe(null);
  expect(await reportVerify({ lesson: 'fork', report: failedReport, attempts: 1, io: io() })).toBe(null);
  expect((await cli(['leave'])).out).toMatch(/not in a classroom/);
});

async function runCliHere(args, extraEnv = {}) {
  const r = await runCli(args, { cwd: dir, env: { ...env, ...extraEnv, NO_COLOR: '1' } });
  return { code: r.code, out: r.stdout, err: r.stderr };
}

test('a real verify reports its outcome, and with the classroom gone queues it with the same exit code and pure JSON', async () => {
  const { c, url } = await classroom();
  await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  const starter = joinPath(PACKAGE_ROOT, 'exercises', 'bottleneck', 'server.js');
  const first = await runCliHere(['verify', '1', starter, '--json']);
  expect(first.code).toBe(1);
  const report = JSON.parse(first.out);
  expect(first.err).toMatch(/classroom: result sent/);
  const failed = report.steps.find((s) => !s.passed).id;
  expect(c.store.state.history).toEqual([expect.objectContaining({ lesson: 'bottleneck', passed: false, failedStep: failed, attempt: 1 })]);

  await c.close();
  const second = await runCliHere(['verify', '1', starter, '--json']);
  expect(second.code).toBe(1);
  expect(JSON.parse(second.out).lesson).toBe('bottleneck');
  expect(second.err).toMatch(/classroom: could not reach .*connection refused.*1 result\(s\) queued/);
  expect(loadJoin({ env, cwd: dir }).info.queue).toEqual([expect.objectContaining({ lesson: 'bottleneck', attempt: 2, failedStep: failed })]);
});

// Issue 14, item 11 (the learner's side) and item 8 (one message, one meaning).
test('a full queue drops its oldest results and says so', async () => {
  const { c, url } = await classroom();
  await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  const file = loadJoin({ env, cwd: dir }).file;
  const info = JSON.parse(readFileSync(file, 'utf8'));
  const old = Array.from({ length: 50 }, (_, i) => ({ id: `old-result-${i}`, lesson: 'fork', passed: false, failedStep: 'worker-count', durationMs: 1, attempt: i + 1, at: new Date().toISOString() }));
  writeFileSync(file, JSON.stringify({ ...info, url: 'http://127.0.0.1:1', queue: old }));
  const r = await reportVerify({ lesson: 'fork', report: failedReport, attempts: 51, io: io() });
  expect(r.queued).toBe(50);
  expect(r.message).toMatch(/The queue keeps 50 results: the 1 oldest were dropped\./);
  expect(loadJoin({ env, cwd: dir }).info.queue[0].id).toBe('old-result-1');
});

test('"with N queued" counts only results the classroom did not already have', async () => {
  const { c, url } = await classroom();
  await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  await reportVerify({ lesson: 'fork', report: failedReport, attempts: 1, io: io() });
  // The first try of that result arrived but its answer did not: it is still queued.
  const file = loadJoin({ env, cwd: dir }).file;
  const info = JSON.parse(readFileSync(file, 'utf8'));
  writeFileSync(file, JSON.stringify({ ...info, queue: [{ ...c.store.state.history[0], id: c.store.state.learners.l1.recentIds[0], at: new Date().toISOString(), receivedAt: undefined, sentAt: undefined }].map(({ learner, receivedAt, sentAt, ...r }) => r) }));
  const r = await reportVerify({ lesson: 'fork', report: passedReport, attempts: 2, io: io() });
  expect(r.message).toBe('result sent to "Client test".');
  expect(c.store.rows()[0].lessons.fork.reports).toBe(2);
});

test('a result the classroom does not take is called dropped, never sent', async () => {
  const { c, url } = await classroom();
  await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  const r = await reportVerify({ lesson: 'fork', report: { passed: false, durationMs: 5, steps: [{ id: 'x'.repeat(65), passed: false }] }, attempts: 1, io: io() });
  expect(r.message).not.toMatch(/sent/);
  expect(r.message).toMatch(/did not take this result \(failedStep is not a step of lesson fork\); it was dropped/);
  expect(r.queued).toBe(0);
});

test('the join file is written with the one atomic write: owner-only, no temporary file left', async () => {
  const { c, url } = await classroom();
  await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  const { file } = loadJoin({ env, cwd: dir });
  const { statSync, readdirSync } = await import('node:fs');
  const { dirname } = await import('node:path');
  expect(statSync(file).mode & 0o777).toBe(0o600);
  await reportVerify({ lesson: 'fork', report: failedReport, attempts: 1, io: io() });
  expect(readdirSync(dirname(file)).filter((f) => f.includes('tmp'))).toEqual([]);
});

test('a learner who lost classroom.json joins again under their name once the instructor allows it', async () => {
  const { c, url } = await classroom();
  await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  await reportVerify({ lesson: 'fork', report: failedReport, attempts: 1, io: io() });
  rmSync(joinPath(dir, 'config'), { recursive: true });
  const refused = await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  expect(refused.err).toMatch(/ask the instructor to let you join again/);
  c.store.allowRejoin('l1');
  const back = await cli(['join', url, '--code', c.store.joinCode, '--name', 'Ada']);
  expect(back.code).toBe(0);
  expect(back.out).toMatch(/You joined "Client test" as Ada again: your earlier results are kept\./);
  await reportVerify({ lesson: 'fork', report: failedReport, attempts: 2, io: io() });
  expect(c.store.rows()).toEqual([expect.objectContaining({ id: 'l1', lessons: { fork: expect.objectContaining({ reports: 2 }) } })]);
});
