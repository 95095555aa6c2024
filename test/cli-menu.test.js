// The interactive menu in a real pseudo-terminal: tmux runs the CLI, keys go
// in with send-keys, the screen comes back with capture-pane. Every wait is a
// bounded poll of the screen, never a fixed sleep.
import { copyFileSync, existsSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { findLesson, loadLessons } from '../lib/manifest.js';
import { starterText } from '../lib/workspace.js';
import { runCli, tempDir, removeDir } from './helpers/cli.js';
import { hasTmux, openTerminal } from './helpers/terminal.js';

describe('the menu in a terminal', () => {
  let cwd;
  let term;
  beforeEach(() => {
    if (!hasTmux) throw new Error('These tests need tmux: apt-get install -y tmux (.ci/run installs it).');
    cwd = tempDir('cw-menu-');
  });
  afterEach(() => {
    term?.close();
    term = undefined;
    removeDir(cwd);
  });

  test('lists the lessons with their status; choosing one and "Start it" copies the starter; Esc leaves with 0', async () => {
    term = openTerminal(cwd);
    const first = await term.waitFor(/Choose a lesson \(0 of \d+ done\)/);
    expect(first).toMatch(/❯ +1\. One process, one thread/);
    // The optional lesson says so, wherever the manifest puts it.
    const optional = loadLessons().find((l) => l.optional);
    expect(first).toMatch(new RegExp(`${optional.number}\\. .*\\(optional\\)`));
    term.keys('Enter');
    await term.waitFor(/Lesson 1: .*\(not started\)[\s\S]*❯ Start it: copy the starter/);
    term.keys('Enter');
    await term.waitFor(/Your file: +cluster-workshop\/bottleneck\/server\.js[\s\S]*\(started\)[\s\S]*❯ Verify my program/);
    expect(readFileSync(join(cwd, 'cluster-workshop', 'bottleneck', 'server.js'), 'utf8')).toBe(starterText(findLesson(1)));
    term.keys('Escape');
    await term.waitFor(/EXIT:0/);
  });

  test('Ctrl-C leaves with exit code 0', async () => {
    term = openTerminal(cwd);
    await term.waitFor(/Choose a lesson/);
    term.keys('C-c');
    const text = await term.waitFor(/EXIT:\d+/);
    expect(text).toMatch(/EXIT:0/);
  });

  test('shows progress made on the command line, verifies from the menu, and offers the next lesson after a pass', async () => {
    expect((await runCli(['start', '1'], { cwd })).code).toBe(0);
    copyFileSync(findLesson(1).paths.solution, join(cwd, 'cluster-workshop', 'bottleneck', 'server.js'));
    term = openTerminal(cwd);
    await term.waitFor(/❯ ▶ +1\. One process, one thread: the bottleneck +\[current\]/);
    term.keys('Enter');
    await term.waitFor(/❯ Verify my program/);
    term.keys('Enter');
    await term.waitFor(/PASSED[\s\S]*is done[\s\S]*❯ Next lesson: 2\./, 60000);
    term.keys('Enter');
    await term.waitFor(/Lesson 2: .*\(started\)/);
    expect(existsSync(join(cwd, 'cluster-workshop', 'fork', 'server.js'))).toBe(true);
    term.keys('C-c');
    await term.waitFor(/EXIT:0/);
  });

  test('with CI set, even a terminal gets the list and the commands, not a prompt', async () => {
    term = openTerminal(cwd, { env: 'env CI=true NO_COLOR=1' });
    const text = await term.waitFor(/EXIT:\d+/);
    expect(text).toMatch(/EXIT:0/);
    expect(text).toMatch(/\[ \] +1 +bottleneck/);
    expect(text).not.toMatch(/Choose a lesson/);
  });
});
