// Every way a learner can start cluster-workshop, driven as they would: the
// command the CLI prints (in `start`'s output and in the starter's header)
// is taken as printed and run from the lesson folder, where the lesson text
// says to `cd`. Routes: the packed tarball installed into an empty folder
// (`npx cluster-workshop`), installed globally (`cluster-workshop`), run
// with `npx ./cluster-workshop-x.y.z.tgz` (then `npx --yes -p /abs/... cluster-workshop`),
// and a clone (`node /abs/bin/cluster-workshop.js`).
import { execFileSync, spawnSync } from 'node:child_process';
import { copyFileSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { BIN, ROOT, cleanEnv, removeDir, tempDir } from './helpers/cli.js';
import { quote } from '../lib/invocation.js';

const NPM = process.platform === 'win32' ? 'npm.cmd' : 'npm';
const npmEnv = cleanEnv();
delete npmEnv.CI;

let base;
let tarball;
beforeAll(() => {
  base = tempDir('cw-routes-');
  const out = execFileSync(NPM, ['pack', '--json', '--pack-destination', base, '--loglevel=error'], { cwd: ROOT, env: npmEnv }).toString();
  tarball = join(base, JSON.parse(out.slice(out.indexOf('[')))[0].filename);
}, 120000);
afterAll(() => removeDir(base));

/** Runs a command line as the learner's shell would, in cwd. */
function shell(line, cwd, env = {}) {
  const r = spawnSync('sh', ['-c', line], { cwd, env: { ...cleanEnv(), ...env }, encoding: 'utf8', stdin: 'ignore', timeout: 180000 });
  return { code: r.status, out: `${r.stdout}${r.stderr}` };
}

/** start 1 from folder, then the printed commands from the lesson folder; returns the command the CLI printed. */
function startAndUseFromLessonFolder(startLine, folder, env = {}) {
  const started = shell(`${startLine} start 1`, folder, env);
  expect({ code: started.code, out: started.out }).toMatchObject({ code: 0 });
  const printed = /verify it: +(.+) verify\s*$/m.exec(started.out)?.[1];
  expect(printed).toBeDefined();
  const lessonFolder = join(folder, 'cluster-workshop', 'bottleneck');
  const header = /^\/\/ Check it: +(.+) verify bottleneck server\.js$/m.exec(readFileSync(join(lessonFolder, 'server.js'), 'utf8'))?.[1];
  expect(header).toBe(printed);
  const current = shell(`${printed} current`, lessonFolder, env);
  expect({ code: current.code, out: current.out }).toMatchObject({ code: 0, out: expect.stringMatching(/Lesson 1 \(bottleneck\)[\s\S]*status: +started/) });
  expect(current.out).not.toMatch(/Ok to proceed|npm error/);
  const print = shell(`${printed} print 1`, lessonFolder, env);
  // The text's commands paste in any folder: its cd names the lesson folder whole, its verify line no file.
  expect(print.out).toContain(`${printed} verify bottleneck\n`);
  expect(print.out).toContain(`cd ${quote(lessonFolder)}\n`);
  return printed;
}

test('the tarball installed into an empty folder: npx cluster-workshop, from the lesson folder too', () => {
  const folder = join(base, 'local');
  execFileSync('mkdir', ['-p', folder]);
  execFileSync(NPM, ['install', '--prefix', folder, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', tarball], { cwd: folder, env: npmEnv });
  expect(startAndUseFromLessonFolder('npx --no cluster-workshop', folder)).toBe('npx cluster-workshop');
}, 300000);

test('installed globally: cluster-workshop, from the lesson folder too', () => {
  const prefix = join(base, 'global');
  execFileSync(NPM, ['install', '-g', '--prefix', prefix, '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', tarball], { env: npmEnv });
  const folder = tempDir('cw-routes-global-');
  try {
    const env = { PATH: `${join(prefix, 'bin')}:${process.env.PATH}` };
    expect(startAndUseFromLessonFolder('cluster-workshop', folder, env)).toBe('cluster-workshop');
  } finally {
    removeDir(folder);
  }
}, 300000);

test('npx ./cluster-workshop-x.y.z.tgz beside the file: the tarball by its absolute path, which works from the lesson folder', () => {
  const folder = join(base, 'npx-tarball');
  execFileSync('mkdir', ['-p', folder]);
  copyFileSync(tarball, join(folder, 'cw.tgz'));
  const printed = startAndUseFromLessonFolder('npx --yes --prefer-offline ./cw.tgz', folder);
  expect(printed).toBe(`npx --yes -p ${join(folder, 'cw.tgz')} cluster-workshop`);
}, 300000);

test('a clone: node with the absolute path of bin/cluster-workshop.js, from the lesson folder too', () => {
  const folder = tempDir('cw-routes-clone-');
  try {
    expect(startAndUseFromLessonFolder(`node ${BIN}`, folder)).toBe(`node ${BIN}`);
  } finally {
    removeDir(folder);
  }
});
