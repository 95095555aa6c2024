// The course layer (lib/course) on its own: the exit code for a signal, which
// lesson comes by default and next, the order hints come in, and the verify
// path's contract: progress recorded, the verdict shown before the classroom
// is told, an interrupted run neither recorded nor reported.
import { mkdirSync, rmSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { exitCodeForSignal, EXIT } from '../lib/course/exit.js';
import { defaultLesson, lessonAfter } from '../lib/course/lessons.js';
import { nextHint } from '../lib/course/hints.js';
import { verifyLesson } from '../lib/course/verify.js';
import { findLesson, loadLessons, PACKAGE_ROOT } from '../lib/manifest.js';
import { Progress } from '../lib/progress.js';
import { SilentReporter } from '../lib/cli/reporter.js';
import { createClassroom } from '../lib/classroom/server.js';
import { joinClass } from '../lib/classroom/client.js';

const SYNTAX_ERROR = join(PACKAGE_ROOT, 'test', 'fixtures', 'harness', 'syntax-error.js');

test('a command stopped by a signal exits 128 + its number, as README.md says', () => {
  expect(['SIGHUP', 'SIGINT', 'SIGTERM'].map(exitCodeForSignal)).toEqual([129, 130, 143]);
  // watch cancels a run because the file changed: not a signal
  expect(exitCodeForSignal('file changed')).toBe(128);
});

describe('which lesson', () => {
  const lessons = loadLessons();
  const memory = () => Progress.load(join(tmpdir(), 'cw-no-such-workspace'));

  test('by default: the current one, else the first not done', () => {
    const progress = memory();
    expect(defaultLesson(progress).id).toBe(lessons[0].id);
    progress.recordVerify(lessons[0].id, { passed: true, steps: [] });
    expect(defaultLesson(progress).id).toBe(lessons[1].id);
    progress.markStarted(lessons[3].id);
    expect(defaultLesson(progress).id).toBe(lessons[3].id);
  });

  test('next: the one after in the manifest, none after the last', () => {
    expect(lessonAfter(lessons[0]).id).toBe(lessons[1].id);
    expect(lessonAfter(lessons[lessons.length - 1])).toBeUndefined();
  });
});

test('hints come one at a time, the ones about the failed step first (nudge first), and start over after the last', () => {
  const lesson = findLesson('bottleneck');
  const progress = Progress.load(join(tmpdir(), 'cw-no-such-workspace'));
  const texts = lesson.hints.map((h) => h.text);
  const failedAt = 'heavy-takes-time';
  const about = lesson.hints.filter((h) => h.steps.includes(failedAt)).map((h) => h.text);
  expect(about.length).toBeGreaterThan(1);
  expect(texts.indexOf(about[0])).toBeGreaterThan(0); // not simply the first hint of the lesson
  progress.recordVerify(lesson.id, { passed: false, steps: [{ id: failedAt, passed: false }] });
  const shown = [];
  for (let i = 0; i < texts.length + 1; i++) shown.push(nextHint(lesson, progress));
  expect(shown[0]).toMatchObject({ hint: { text: about[0] }, number: 1, total: texts.length, failedStep: failedAt, aboutFailedStep: true });
  expect(shown.slice(0, about.length).map((h) => h.hint.text)).toEqual(about);
  expect(shown.slice(0, texts.length).map((h) => h.hint.text).sort()).toEqual([...texts].sort());
  expect(shown[texts.length]).toMatchObject({ hint: { text: about[0] }, number: 1, startedOver: true });
});

describe('verifyLesson', () => {
  let dir;
  let classroom;
  let env;
  beforeEach(async () => {
    dir = mkdtempSync(join(tmpdir(), 'cw-course-'));
    env = { HOME: join(dir, 'home'), XDG_CONFIG_HOME: join(dir, 'config') };
    mkdirSync(join(dir, 'cluster-workshop'));
    classroom = await createClassroom({ stateFile: join(dir, 'class.json'), title: 'Course layer' });
    const { port } = await classroom.listen(0, '127.0.0.1');
    await joinClass({ url: `http://127.0.0.1:${port}`, code: classroom.store.joinCode, name: 'Ada', dir: join(dir, 'cluster-workshop'), env, cwd: dir });
  });
  afterEach(async () => {
    await classroom.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const io = () => ({ err: () => {}, env, cwd: dir });

  test('records the attempt, shows the verdict, then tells the classroom; exit 1 for a failure', async () => {
    const lesson = findLesson('bottleneck');
    const workspace = join(dir, 'cluster-workshop');
    let reportsWhenShown = null;
    const outcome = await verifyLesson({
      lesson,
      file: SYNTAX_ERROR,
      dir: workspace,
      reporter: new SilentReporter(),
      io: io(),
      onVerdict: () => (reportsWhenShown = classroom.store.state.history.length),
    });
    expect(outcome).toMatchObject({ exitCode: EXIT.failed, attempts: 1, report: { passed: false } });
    expect(Progress.load(workspace).lesson(lesson.id)).toMatchObject({ attempts: 1, lastVerify: { passed: false, failedStep: 'starts' } });
    expect(reportsWhenShown).toBe(0);
    expect(classroom.store.state.history).toEqual([expect.objectContaining({ lesson: lesson.id, passed: false, failedStep: 'starts', attempt: 1 })]);
  });

  test('an interrupted run: the exit code of its signal, nothing recorded, nothing reported', async () => {
    const lesson = findLesson('bottleneck');
    const workspace = join(dir, 'cluster-workshop');
    const controller = new AbortController();
    // Interrupted as the first step begins, as Ctrl-C during a verify does.
    const reporter = Object.assign(new SilentReporter(), { stepStart: () => controller.abort('SIGTERM') });
    const outcome = await verifyLesson({ lesson, file: join(PACKAGE_ROOT, 'solutions', 'bottleneck', 'server.js'), dir: workspace, reporter, signal: controller.signal, io: io() });
    expect(outcome).toMatchObject({ exitCode: 143, report: { interrupted: 'SIGTERM' } });
    expect(Progress.load(workspace).lesson(lesson.id).attempts).toBe(0);
    expect(classroom.store.state.history).toEqual([]);
  });
});
