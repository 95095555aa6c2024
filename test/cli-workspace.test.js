// The workspace and progress commands, through the real CLI in temporary
// folders without a terminal: start, verify with no file, hint, solution,
// reset, next, select, current, and what happens to a broken progress file.
import { existsSync, mkdirSync, readFileSync, writeFileSync, symlinkSync, unlinkSync, realpathSync } from 'node:fs';
import { join } from 'node:path';
import { execFileSync } from 'node:child_process';
import { findLesson } from '../lib/manifest.js';
import { starterText } from '../lib/workspace.js';
import { runCli, tempDir, removeDir, ROOT } from './helpers/cli.js';

const lesson1 = findLesson(1);
const lesson2 = findLesson(2);
// The starter as start copies it: its {{cli}} rendered as this clone's command.
const starter1 = starterText(lesson1);
const solution1 = readFileSync(lesson1.paths.solution, 'utf8');

const readJson = (p) => JSON.parse(readFileSync(p, 'utf8'));

describe('a learner working through lesson 1 in an empty folder', () => {
  let cwd;
  let ws;
  let file;
  beforeAll(() => {
    cwd = tempDir();
    ws = join(cwd, 'cluster-workshop');
    file = join(ws, 'bottleneck', 'server.js');
  });
  afterAll(() => removeDir(cwd));

  test('start copies the starter, prints its path and the verify command, and makes the lesson current', async () => {
    const r = await runCli(['start'], { cwd });
    expect(r.code).toBe(0);
    expect(readFileSync(file, 'utf8')).toBe(starter1);
    expect(r.stdout).toContain(join('cluster-workshop', 'bottleneck', 'server.js'));
    expect(r.stdout).toMatch(/verify it: +node \S*cluster-workshop\.js verify\n/);
    expect(readJson(join(ws, 'progress.json'))).toMatchObject({ version: 1, current: 'bottleneck', lessons: { bottleneck: { status: 'started' } } });
  });

  test('plain node resolves express in the workspace, from the install that ran the command', () => {
    expect(readJson(join(ws, 'package.json'))).toMatchObject({ type: 'module', private: true });
    const resolved = execFileSync(process.execPath, ['--input-type=module', '-e', "console.log(import.meta.resolve('express'))"], {
      cwd: join(ws, 'bottleneck'),
      env: { PATH: process.env.PATH },
    }).toString();
    expect(realpathSync(new URL(resolved.trim()).pathname)).toBe(realpathSync(join(ROOT, 'node_modules', 'express', 'index.js')));
  });

  test('start again keeps an edited file and says how to start over', async () => {
    writeFileSync(file, `${starter1}\n// my edit\n`);
    const r = await runCli(['start', '1'], { cwd });
    expect(r.code).toBe(0);
    expect(readFileSync(file, 'utf8')).toContain('// my edit');
    expect(r.stdout).toMatch(/already there, kept.*reset 1/);
  });

  test('a link to express that points nowhere (npx cache cleaned) is repaired by the next command', async () => {
    const link = join(ws, 'node_modules', 'express');
    unlinkSync(link);
    symlinkSync(join(cwd, 'gone', 'express'), link);
    const r = await runCli(['start'], { cwd });
    expect(r.code).toBe(0);
    expect(realpathSync(link)).toBe(realpathSync(join(ROOT, 'node_modules', 'express')));
  });

  test('verify with no file verifies the workspace file; a failure is recorded and the matching hint comes first', async () => {
    writeFileSync(file, starter1);
    const r = await runCli(['verify'], { cwd });
    expect(r.code).toBe(1);
    expect(r.stdout).toContain(`file: ${realpathSync(file)}`);
    expect(r.stdout).not.toMatch(/\r|\x1b|[⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏]/); // no spinner, no colour without a terminal
    const failedStep = readJson(join(ws, 'progress.json')).lessons.bottleneck.lastVerify.failedStep;
    expect(failedStep).toBe('heavy-takes-time');

    // The hints about the failed step come first, graded: the nudge, then the API, then the near-answer.
    const total = lesson1.hints.length;
    const matching = lesson1.hints.filter((h) => h.steps?.includes(failedStep));
    expect(matching.length).toBeGreaterThan(1);
    const first = await runCli(['hint'], { cwd });
    expect(first.code).toBe(0);
    expect(first.stdout).toContain(`Hint 1 of ${total}`);
    expect(first.stdout).toContain(matching[0].text);
    expect(first.stdout).toContain(`failed at: ${failedStep}`);
    const second = await runCli(['hint'], { cwd });
    expect(second.stdout).toContain(`Hint 2 of ${total}`);
    expect(second.stdout).toContain(matching[1].text);

    // Then the others, one at a time in manifest order, then around again.
    const order = [...matching, ...lesson1.hints.filter((h) => !matching.includes(h))];
    for (let i = 2; i < total; i++) {
      const next = await runCli(['hint', 'bottleneck'], { cwd });
      expect(next.stdout).toContain(order[i].text);
    }
    const again = await runCli(['hint'], { cwd });
    expect(again.stdout).toMatch(new RegExp(`seen all ${total} hints`));
    expect(again.stdout).toContain(matching[0].text);
  });

  test('solution of a lesson not passed refuses without a terminal and says to pass --yes', async () => {
    const r = await runCli(['solution'], { cwd });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/--yes/);
    expect(r.stdout).not.toContain('burn');
    const yes = await runCli(['solution', '--yes'], { cwd });
    expect(yes.code).toBe(0);
    expect(yes.stdout).toContain('while (Date.now() < end)');
  });

  test('a pass marks the lesson done, shows the solution with what to compare, and does not move on by itself', async () => {
    writeFileSync(file, solution1);
    // From inside the lesson folder, as a learner who went there to run `node server.js`.
    const r = await runCli(['verify'], { cwd: join(ws, 'bottleneck') });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain('Lesson 1 (bottleneck) is done.');
    expect(r.stdout).toContain('What to compare:');
    expect(r.stdout).toMatch(/^\s*\d+ \+ {3}while \(Date\.now\(\) < end\) \{$/m);
    expect(r.stdout).toMatch(/Go on when you are ready: node \S+ next/);
    const state = readJson(join(ws, 'progress.json'));
    expect(state.current).toBe('bottleneck');
    expect(state.lessons.bottleneck.status).toBe('done');
    expect(existsSync(join(ws, 'fork'))).toBe(false);

    const list = await runCli(['list'], { cwd });
    expect(list.stdout).toMatch(/\[x\]\s+1\s+bottleneck.*done/);
    const solution = await runCli(['solution'], { cwd });
    expect(solution.code).toBe(0); // passed: no question
  });

  test('next starts lesson 2; select and current move around; nothing is overwritten', async () => {
    const next = await runCli(['next'], { cwd });
    expect(next.code).toBe(0);
    expect(readFileSync(join(ws, 'fork', 'server.js'), 'utf8')).toBe(starterText(lesson2));
    expect(readJson(join(ws, 'progress.json')).current).toBe('fork');

    const select = await runCli(['select', 'bottleneck'], { cwd });
    expect(select.code).toBe(0);
    expect(readFileSync(file, 'utf8')).toBe(solution1);
    const current = await runCli(['current'], { cwd });
    expect(current.stdout).toMatch(/Lesson 1 \(bottleneck\)/);
    expect(current.stdout).toMatch(/status: +done/);

    const missing = await runCli(['select'], { cwd });
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/select 2/);
  });

  test('reset asks before discarding work: refuses without --yes, then restores the starter and keeps a backup', async () => {
    const refused = await runCli(['reset', '1'], { cwd });
    expect(refused.code).toBe(2);
    expect(refused.stderr).toMatch(/reset 1 --yes/);
    expect(readFileSync(file, 'utf8')).toBe(solution1);

    const r = await runCli(['reset', '1', '--yes'], { cwd });
    expect(r.code).toBe(0);
    expect(readFileSync(file, 'utf8')).toBe(starter1);
    expect(readFileSync(`${file}.bak`, 'utf8')).toBe(solution1);
    const state = readJson(join(ws, 'progress.json'));
    expect(state.lessons.bottleneck).toMatchObject({ status: 'started', attempts: 0 });
    expect(state.current).toBe('bottleneck');
  });

  test('reset --all starts the course over', async () => {
    writeFileSync(join(ws, 'fork', 'server.js'), '// edited\n');
    expect((await runCli(['reset', '--all'], { cwd })).code).toBe(2);
    const r = await runCli(['reset', '--all', '--yes'], { cwd });
    expect(r.code).toBe(0);
    expect(readFileSync(join(ws, 'fork', 'server.js'), 'utf8')).toBe(starterText(lesson2));
    expect(readJson(join(ws, 'progress.json'))).toMatchObject({ current: null, lessons: {} });
  });
});

describe('the progress file', () => {
  let cwd;
  beforeEach(() => {
    cwd = tempDir();
  });
  afterEach(() => removeDir(cwd));

  test('a corrupt file is set aside with a warning, never a crash', async () => {
    await runCli(['start', '2'], { cwd });
    const file = join(cwd, 'cluster-workshop', 'progress.json');
    writeFileSync(file, '{"version": 1, "lessons": ');
    const r = await runCli(['start', '1'], { cwd });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/could not be read.*moved to .*progress\.json\.corrupt-\d+/);
    expect(readJson(file)).toMatchObject({ version: 1, current: 'bottleneck' });
  });

  test('a file from a newer cluster-workshop is neither moved nor overwritten', async () => {
    await runCli(['start', '1'], { cwd });
    const file = join(cwd, 'cluster-workshop', 'progress.json');
    const newer = '{"version": 99, "somethingNew": true}\n';
    writeFileSync(file, newer);
    const r = await runCli(['start', '2'], { cwd });
    expect(r.code).toBe(0);
    expect(r.stderr).toMatch(/newer cluster-workshop/);
    expect(readFileSync(file, 'utf8')).toBe(newer);
  });

  test('--dir puts the workspace where it is told, and the printed commands carry it', async () => {
    const r = await runCli(['start', '1', '--dir', 'my work'], { cwd });
    expect(r.code).toBe(0);
    expect(existsSync(join(cwd, 'my work', 'bottleneck', 'server.js'))).toBe(true);
    expect(r.stdout).toMatch(/verify --dir "my work"/);
    const current = await runCli(['current', '--dir', 'my work'], { cwd });
    expect(current.stdout).toMatch(/Lesson 1 \(bottleneck\)/);
  });

  test('verify with no lesson and no workspace says how to begin', async () => {
    const r = await runCli(['verify'], { cwd });
    expect(r.code).toBe(2);
    expect(r.stderr).toMatch(/bin\/cluster-workshop\.js start`/); // the command as this learner runs it (here: a clone)
  });
});

describe('a workspace made before lessons were named by id (numbered folders)', () => {
  let cwd;
  let ws;
  const edited = `${starterText(lesson2)}\n// my own edit, not the starter\n`;
  beforeAll(() => {
    cwd = tempDir();
    ws = join(cwd, 'cluster-workshop');
    // Exactly what the release before named folders by position: 01-bottleneck passed, 02-fork started and edited.
    mkdirSync(join(ws, '01-bottleneck'), { recursive: true });
    mkdirSync(join(ws, '02-fork'), { recursive: true });
    writeFileSync(join(ws, '01-bottleneck', 'server.js'), solution1);
    writeFileSync(join(ws, '02-fork', 'server.js'), edited);
    writeFileSync(join(ws, 'package.json'), JSON.stringify({ name: 'cluster-workshop-workspace', private: true, type: 'module' }));
    writeFileSync(
      join(ws, 'progress.json'),
      JSON.stringify({ version: 1, current: 'fork', lessons: { bottleneck: { status: 'done', attempts: 1 }, fork: { status: 'started', attempts: 0 } }, measurements: {} }),
    );
  });
  afterAll(() => removeDir(cwd));

  test('current names the edited lesson-2 file, moved once to its id folder with a line saying so', async () => {
    const r = await runCli(['current'], { cwd });
    expect(r.code).toBe(0);
    expect(r.stdout).toContain(join('cluster-workshop', 'fork', 'server.js'));
    expect(r.stderr).toMatch(/Moved 02-fork\/ to fork\//);
    expect(readFileSync(join(ws, 'fork', 'server.js'), 'utf8')).toBe(edited);
    expect(existsSync(join(ws, '02-fork'))).toBe(false);
    const again = await runCli(['current'], { cwd });
    expect(again.stderr).not.toMatch(/Moved/);
  });

  test('list still shows lesson 1 done', async () => {
    const r = await runCli(['list'], { cwd });
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/\[(✓|x|done)\]\s+1\s+bottleneck/);
    expect(readFileSync(join(ws, 'bottleneck', 'server.js'), 'utf8')).toBe(solution1);
  });
});
