// "Read the lesson" in a 40-line terminal, as a learner sees it: the lesson
// (about 90 lines) is paged, so its first line is on the screen, and leaving
// the pager comes back to the menu. Through less -R (on this machine's PATH),
// and through the built-in pager where there is no less and no $PAGER.
// Piped output is never paged (test/hints.test.js reads print through a pipe).
import { findLesson } from '../lib/manifest.js';
import { removeDir, tempDir } from './helpers/cli.js';
import { hasTmux, openTerminal } from './helpers/terminal.js';

const title = /^# One process, one thread: the bottleneck$/m;
const lastLine = /^- \[.*\]\(.*\)$/m; // the lesson ends with its "Read more" links

describe('Read the lesson, in a 40-line terminal', () => {
  let cwd;
  let term;
  beforeEach(() => {
    if (!hasTmux) throw new Error('These tests need tmux: apt-get install -y tmux (.ci/run installs it).');
    cwd = tempDir('cw-pager-');
  });
  afterEach(() => {
    term?.close();
    term = undefined;
    removeDir(cwd);
  });

  async function openLesson(env) {
    term = openTerminal(cwd, { env, rows: 40 });
    await term.waitFor(/Choose a lesson/);
    term.keys('Enter'); // lesson 1
    await term.waitFor(/❯ Start it: copy the starter/);
    term.keys('Up', 'Enter'); // "Read the lesson", just above
    await term.waitFor(title);
  }

  test('less -R: the first line of the lesson is on screen; q goes back to the menu', async () => {
    expect(findLesson(1).id).toBe('bottleneck');
    await openLesson('env -u CI -u FORCE_COLOR -u PAGER NO_COLOR=1');
    await term.waitFor(/^:|\(END\)/m); // less's prompt: it is waiting for a key
    const screen = term.visible();
    expect(screen).toMatch(title);
    expect(screen).not.toMatch(lastLine);
    term.keys('q');
    await term.waitFor(/Lesson 1: .*\n[\s\S]*❯ Read the lesson/);
    term.keys('C-c');
    await term.waitFor(/EXIT:0/);
  });

  test('no less and no $PAGER: the built-in pager shows the first screen, space pages on, q goes back', async () => {
    // An empty folder as PATH: no less (the terminal runs node by its absolute path).
    await openLesson(`env -u CI -u FORCE_COLOR -u PAGER NO_COLOR=1 PATH=${cwd}`);
    await term.waitFor(/-- more: space next page/);
    const first = term.visible();
    expect(first).toMatch(title);
    expect(first).not.toMatch(lastLine);
    term.keys('Space');
    await term.waitFor(/Common mistakes|What the verifier checks/);
    term.keys('q');
    await term.waitFor(/❯ Read the lesson/);
    term.keys('C-c');
    await term.waitFor(/EXIT:0/);
  });

  test('$PAGER is used when the learner set one', async () => {
    await openLesson(`env -u CI -u FORCE_COLOR NO_COLOR=1 PAGER='head -n 5'`);
    const text = await term.waitFor(/❯ Read the lesson/);
    expect(text).toMatch(title);
    expect(text).not.toMatch(/Node.js runs your JavaScript[\s\S]*## Your task/);
    term.keys('C-c');
    await term.waitFor(/EXIT:0/);
  });

  test('print on its own, in colour: paged by less -R, and q ends it with exit code 0', async () => {
    term = openTerminal(cwd, { env: 'env -u CI -u NO_COLOR -u PAGER TERM=xterm-256color', rows: 40, args: ['print', '1'] });
    await term.waitFor(/One process, one thread: the bottleneck/);
    await term.waitFor(/^:|\(END\)/m);
    expect(term.visible()).not.toMatch(lastLine);
    term.keys('q');
    await term.waitFor(/EXIT:0/);
  });
});
