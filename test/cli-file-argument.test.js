// The [file] argument as the lesson texts print it (`verify <id> server.js`),
// typed where a learner types it: in the lesson's folder, in the workspace,
// or in the folder above it. And a script that asked for --json gets JSON
// even when the command line itself is wrong.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { runCli, tempDir, removeDir } from './helpers/cli.js';

let top; // the folder the learner started the workshop in
let lessonDir;
beforeAll(async () => {
  top = tempDir();
  const r = await runCli(['start', 'fork'], { cwd: top });
  expect(r.code).toBe(0);
  lessonDir = join(top, 'cluster-workshop', 'fork');
});
afterAll(() => removeDir(top));

// A program that fails the first step at once: the test is about which file
// was taken, not the verdict.
const exitsAtOnce = 'process.exit(1);\n';

test.each([
  ['the folder the workspace is in', () => top],
  ["the workspace's top folder", () => join(top, 'cluster-workshop')],
])('verify fork server.js typed in %s verifies the lesson folder\'s file, and says so', async (_, where) => {
  const r = await runCli(['verify', 'fork', 'server.js', '--json'], { cwd: where(), timeoutMs: 60000 });
  expect(r.code).toBe(1);
  expect(JSON.parse(r.stdout).file).toBe(join(lessonDir, 'server.js'));
  expect(r.stderr).toContain(`server.js is not in ${where()}: taking the fork lesson's ${join(lessonDir, 'server.js')}`);
});

test('a file that is where the learner is wins over the lesson folder\'s', async () => {
  const here = join(top, 'mine');
  mkdirSync(here, { recursive: true });
  writeFileSync(join(here, 'server.js'), exitsAtOnce);
  const r = await runCli(['verify', 'fork', 'server.js', '--json'], { cwd: here });
  expect(JSON.parse(r.stdout).file).toBe(join(here, 'server.js'));
  expect(r.stderr).not.toContain('taking the fork lesson');
});

test('a file found nowhere: the message says where it looked and never repeats the command that just failed', async () => {
  const r = await runCli(['verify', 'fork', 'nope.js'], { cwd: top });
  expect(r.code).toBe(2);
  expect(r.stderr).toContain(`There is no file at ${join(top, 'nope.js')}, nor in the fork lesson's folder of your workspace (${join(lessonDir, 'nope.js')})`);
  expect(r.stderr).not.toMatch(/verify fork (nope|server)\.js/);
  expect(r.stderr).toMatch(/verify fork` with no file takes it/);
});

test('bench names its own command, never a verify, when its file is missing', async () => {
  const r = await runCli(['bench', 'nope.js', '--lesson', 'fork'], { cwd: top });
  expect(r.code).toBe(2);
  expect(r.stderr).not.toContain('verify');
  expect(r.stderr).toContain('bench --lesson fork` with no file takes it');
});

describe('verify --json with a usage error prints JSON on stdout, and the words on stderr', () => {
  test.each([
    ['an unknown lesson', ['verify', 'nolesson', '--json'], /There is no lesson "nolesson"/],
    ['a missing file', ['verify', 'fork', 'nope.js', '--json'], /There is no file at/],
    ['an unknown option', ['verify', '--json', '--bogus'], /verify has no option --bogus/],
  ])('%s', async (_, args, words) => {
    const r = await runCli(args, { cwd: top });
    expect(r.code).toBe(2);
    const json = JSON.parse(r.stdout);
    expect(json).toMatchObject({ passed: false, exitCode: 2, error: { kind: 'usage' } });
    expect(json.error.message).toMatch(words);
    expect(r.stderr).toMatch(words);
  });

  test('--json after -- is a file name, not the option', async () => {
    const r = await runCli(['verify', 'fork', '--', '--json'], { cwd: top });
    expect(r.code).toBe(2);
    expect(r.stdout).toBe('');
  });
});

test("an option's problem in our words: which option, and the ones the command has", async () => {
  const unknown = await runCli(['verify', '--bogus'], { cwd: top });
  expect(unknown.stderr).toMatch(/^verify has no option --bogus\. Its options: --help, --json, --dir <value>, --seed <value>\.\n/);
  const noValue = await runCli(['verify', 'fork', '--dir'], { cwd: top });
  expect(noValue.stderr).toMatch(/^--dir needs a value, as in --dir <value>\.\n/);
  const value = await runCli(['verify', '--json=yes'], { cwd: top });
  expect(value.stderr).toMatch(/^--json takes no value\./);
});
