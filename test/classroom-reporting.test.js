// `watch` and the menu's "Verify my program" report to the classroom exactly
// as `verify` does: a real classroom server, a learner who joined through the
// real CLI, and the reports read back from the classroom's state. Each test
// first runs `verify` on the same file, so the entry it left is what the
// others must match (same lesson, verdict and failed step, the next attempt).
import { copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { createClassroom } from '../lib/classroom/server.js';
import { findLesson } from '../lib/manifest.js';
import { markedProcesses } from '../lib/harness/processes.js';
import { runCli, tempDir, removeDir } from './helpers/cli.js';
import { startCli } from './helpers/cli.js';
import { hasTmux, openTerminal } from './helpers/terminal.js';
import { until } from './helpers/until.js';

const lesson = findLesson('bottleneck');

let cwd;
let env; // a home of its own: nothing read from or written to the real config folder
let classroom;
let file; // the learner's lesson file in the workspace
const cleanups = [];

beforeEach(async () => {
  cwd = tempDir('cw-class-report-');
  env = { HOME: join(cwd, 'home'), XDG_CONFIG_HOME: join(cwd, 'config') };
  classroom = await createClassroom({ stateFile: join(cwd, 'class.json'), title: 'Reporting test' });
  const { port } = await classroom.listen(0, '127.0.0.1');
  cleanups.push(() => classroom.close());
  expect((await runCli(['start', lesson.id], { cwd, env })).code).toBe(0);
  file = join(cwd, 'cluster-workshop', lesson.id, 'server.js');
  const joined = await runCli(['join', `http://127.0.0.1:${port}`, '--code', classroom.store.joinCode, '--name', 'Ada'], { cwd, env });
  expect({ code: joined.code, stderr: joined.stderr }).toEqual({ code: 0, stderr: '' });
});

afterEach(async () => {
  for (const fn of cleanups.splice(0).reverse()) await fn();
  removeDir(cwd);
});

const history = () => classroom.store.state.history;
/** What a report says about the learner's program, without its id, time and duration. */
const verdictOf = ({ lesson: id, passed, failedStep, attempt }) => ({ lesson: id, passed, failedStep, attempt });

/** Runs `verify` on the workspace file, as a learner types it; returns the classroom's entry for it. */
async function verifyReports() {
  const before = history().length;
  const r = await runCli(['verify'], { cwd, env });
  expect(r.stderr).toMatch(/classroom: result sent to "Reporting test"/);
  expect(history()).toHaveLength(before + 1);
  return { code: r.code, entry: history()[before] };
}

test('watch reports every run as verify does: the starter as a failure, then the saved solution as a pass', async () => {
  const verified = await verifyReports();
  expect(verified.code).toBe(1);
  expect(verified.entry).toMatchObject({ lesson: lesson.id, passed: false, attempt: 1, failedStep: expect.any(String) });

  const watch = startCli(['watch'], { cwd, env });
  cleanups.push(() => watch.child.kill('SIGKILL'));
  // The classroom line goes to stderr and the step log to stdout: two pipes, so
  // their order here is not the order they were written in. Count, don't order.
  const said = () => watch.out.match(/classroom: result sent to "Reporting test"/g)?.length ?? 0;

  // Run 1 verifies the file as it is (the starter): the same failure reaches the classroom.
  let at = (await watch.waitFor(/FAILED at/)).end;
  await until(() => history().length === 2, 'the classroom has the report of watch run 1');
  expect(verdictOf(history()[1])).toEqual({ ...verdictOf(verified.entry), attempt: 2 });
  await until(() => said() === 1, 'watch says run 1 was sent');

  // The learner saves a program that passes: run 2 reports a pass, and the dashboard shows the lesson done.
  at = (await watch.waitFor(/Waiting for you to save server\.js/, { from: at })).end;
  copyFileSync(lesson.paths.solution, file);
  await watch.waitFor(/run 2 \(server\.js changed\)/, { from: at });
  await until(() => history().length === 3, 'the classroom has the report of watch run 2', 60000);
  await until(() => said() === 2, 'watch says run 2 was sent');
  expect(verdictOf(history()[2])).toEqual({ lesson: lesson.id, passed: true, failedStep: null, attempt: 3 });
  expect(classroom.store.rows()[0].lessons[lesson.id]).toMatchObject({ attempts: 3, passedAt: expect.any(String) });
  // Progress counts the same attempts the classroom saw.
  expect(JSON.parse(readFileSync(join(cwd, 'cluster-workshop', 'progress.json'), 'utf8')).lessons[lesson.id]).toMatchObject({ status: 'done', attempts: 3 });

  watch.child.kill('SIGINT');
  expect(await watch.exited).toEqual({ code: 0, signal: null });
  expect(markedProcesses().filter((p) => Number(p.mark.split(':')[0]) === watch.child.pid)).toEqual([]);
});

test('the menu\'s "Verify my program" reports as verify does', async () => {
  if (!hasTmux) throw new Error('This test needs tmux: apt-get install -y tmux (.ci/run installs it).');
  const verified = await verifyReports();
  expect(verified.entry).toMatchObject({ lesson: lesson.id, passed: false, attempt: 1 });

  const term = openTerminal(cwd, { env: `env -u CI -u FORCE_COLOR NO_COLOR=1 HOME=${JSON.stringify(env.HOME)} XDG_CONFIG_HOME=${JSON.stringify(env.XDG_CONFIG_HOME)}` });
  cleanups.push(() => term.close());
  await term.waitFor(/❯ ▶ +1\. .*\[current\]/);
  term.keys('Enter');
  await term.waitFor(/❯ Verify my program/);
  term.keys('Enter');
  await term.waitFor(/FAILED at[\s\S]*classroom: result sent to "Reporting test"[\s\S]*❯ Verify my program/, 60000);
  await until(() => history().length === 2, 'the classroom has the report of the menu verify');
  expect(verdictOf(history()[1])).toEqual({ ...verdictOf(verified.entry), attempt: 2 });
  term.keys('C-c');
  await term.waitFor(/EXIT:0/);
});
