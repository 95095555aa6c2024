// The package as a learner gets it: `npm pack`, install the tarball into an
// empty folder (from the local npm cache where it can), then `npx
// cluster-workshop` with no clone anywhere: the overview, start, verify.
import { execFileSync } from 'node:child_process';
import { copyFileSync, existsSync, readdirSync, realpathSync } from 'node:fs';
import { join, relative } from 'node:path';
import { loadLessons } from '../lib/manifest.js';
import { lessonAvailable } from '../lib/workspace.js';
import { ROOT, runCli, tempDir, removeDir } from './helpers/cli.js';

const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const NPX = process.platform === 'win32' ? 'npx.cmd' : 'npx';
const npmEnv = { ...process.env };
delete npmEnv.npm_command;
delete npmEnv.CI;

let packDir;
let home;
let packed;
const npx = (args, opts = {}) => runCli(args, { cwd: home, command: [NPX, '--no', 'cluster-workshop'], timeoutMs: 90000, ...opts });

beforeAll(() => {
  packDir = tempDir('cw-pack-');
  home = tempDir('cw-learner-');
  const out = execFileSync(NPM, ['pack', '--json', '--pack-destination', packDir, '--loglevel=error'], { cwd: ROOT, env: npmEnv }).toString();
  packed = JSON.parse(out.slice(out.indexOf('[')))[0];
  execFileSync(NPM, ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', join(packDir, packed.filename)], { cwd: home, env: npmEnv });
}, 240000);

afterAll(() => {
  removeDir(packDir);
  removeDir(home);
});

function filesUnder(dir) {
  return readdirSync(dir, { withFileTypes: true, recursive: true })
    .filter((e) => e.isFile())
    .map((e) => relative(ROOT, join(e.parentPath ?? e.path, e.name)));
}

test('the tarball holds what the CLI needs at run time and nothing of the development tree', () => {
  const files = new Set(packed.files.map((f) => f.path));
  const needed = [
    'package.json',
    'README.md',
    'bin/cluster-workshop.js',
    'lessons/manifest.json',
    ...filesUnder(join(ROOT, 'lib')).filter((f) => f.endsWith('.js')),
    ...loadLessons()
      .filter(lessonAvailable)
      .flatMap((l) => [l.paths.exercise, l.paths.solution, l.paths.verifier].map((p) => relative(ROOT, p))),
  ];
  expect(needed.filter((f) => !files.has(f))).toEqual([]);
  expect([...files].filter((f) => /^(test|node_modules|\.ci|scripts)\//.test(f))).toEqual([]);
});

test('npx cluster-workshop without a terminal prints the lessons and how to begin', async () => {
  const r = await npx([], { env: { CI: 'true' } });
  expect(r.code).toBe(0);
  expect(r.stdout).toMatch(/\[ \] +1 +bottleneck/);
  expect(r.stdout).toContain('Begin with: npx cluster-workshop start');
});

test('a lesson can be started and verified from the installed package', async () => {
  const start = await npx(['start', '1']);
  expect(start.code).toBe(0);
  expect(start.stdout).toContain('npx cluster-workshop verify');
  const lessonDir = join(home, 'cluster-workshop', 'bottleneck');
  expect(existsSync(join(lessonDir, 'server.js'))).toBe(true);
  // express for plain `node server.js` comes from the learner's install, not from this clone.
  const resolved = execFileSync(process.execPath, ['--input-type=module', '-e', "console.log(import.meta.resolve('express'))"], { cwd: lessonDir }).toString();
  expect(realpathSync(new URL(resolved.trim()).pathname)).toBe(realpathSync(join(home, 'node_modules', 'express', 'index.js')));

  const failing = await npx(['verify']);
  expect(failing.code).toBe(1);
  copyFileSync(join(home, 'node_modules', 'cluster-workshop', 'solutions', 'bottleneck', 'server.js'), join(lessonDir, 'server.js'));
  const passing = await npx(['verify']);
  expect({ code: passing.code, tail: passing.stdout.slice(-300) }).toMatchObject({ code: 0 });
  expect(passing.stdout).toContain('Lesson 1 (bottleneck) is done.');
  const list = await npx(['list']);
  expect(list.stdout).toMatch(/\[x\] +1 +bottleneck/);
});
