// The command the CLI prints for itself (lib/invocation.js), for each way a
// learner can have started it. Each case builds the folders that install
// route leaves on disk (npx's cache, a global prefix with its shim on PATH,
// a local install, a clone) and asks what to print there.
import { mkdirSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { cliName, renderCli } from '../lib/invocation.js';
import { loadLessons } from '../lib/manifest.js';
import { removeDir, tempDir } from './helpers/cli.js';

let base;
beforeEach(() => {
  base = tempDir('cw-invocation-');
});
afterEach(() => removeDir(base));

function fakePackage(root) {
  mkdirSync(join(root, 'bin'), { recursive: true });
  writeFileSync(join(root, 'bin', 'cluster-workshop.js'), '');
  writeFileSync(join(root, 'package.json'), '{"name":"cluster-workshop"}');
  return root;
}

function npxCache(npxJson) {
  const dir = join(base, '.npm', '_npx', 'a1b2c3');
  const root = fakePackage(join(dir, 'node_modules', 'cluster-workshop'));
  writeFileSync(join(dir, 'package.json'), JSON.stringify(npxJson));
  return root;
}

test('npx from the registry: npx with what the learner typed', () => {
  const root = npxCache({ dependencies: { 'cluster-workshop': '^0.1.0' }, _npx: { packages: ['cluster-workshop'] } });
  expect(cliName({ root, env: { PATH: '' } })).toBe('npx cluster-workshop');
  const pinned = npxCache({ dependencies: { 'cluster-workshop': '0.2.0' }, _npx: { packages: ['cluster-workshop@0.2.0'] } });
  expect(cliName({ root: pinned, env: { PATH: '' } })).toBe('npx cluster-workshop@0.2.0');
});

test('npx ./cluster-workshop-x.tgz: the tarball by its absolute path through -p, with --yes, so it works from a lesson folder', () => {
  const tarball = join(base, 'class', 'cluster-workshop-0.1.0.tgz');
  const dir = join(base, '.npm', '_npx', 'a1b2c3');
  const root = npxCache({ dependencies: { 'cluster-workshop': `file:../../../class/cluster-workshop-0.1.0.tgz` }, _npx: { packages: ['./cluster-workshop-0.1.0.tgz'] } });
  expect(join(dir, '../../../class/cluster-workshop-0.1.0.tgz')).toBe(tarball);
  expect(cliName({ root, env: { PATH: '' } })).toBe(`npx --yes -p ${tarball} cluster-workshop`);
});

test('a global install (its shim on PATH): the bare command', () => {
  const prefix = join(base, 'prefix');
  const root = fakePackage(join(prefix, 'lib', 'node_modules', 'cluster-workshop'));
  mkdirSync(join(prefix, 'bin'));
  symlinkSync(join(root, 'bin', 'cluster-workshop.js'), join(prefix, 'bin', 'cluster-workshop'));
  expect(cliName({ root, env: { PATH: ['/usr/bin', join(prefix, 'bin')].join(':') } })).toBe('cluster-workshop');
});

test('a local install (the tarball installed into the class folder): npx finds it from every folder below', () => {
  const root = fakePackage(join(base, 'class', 'node_modules', 'cluster-workshop'));
  // npx puts the local .bin on PATH while it runs us: that is not a command the learner's shell has.
  mkdirSync(join(base, 'class', 'node_modules', '.bin'));
  symlinkSync(join(root, 'bin', 'cluster-workshop.js'), join(base, 'class', 'node_modules', '.bin', 'cluster-workshop'));
  expect(cliName({ root, env: { PATH: join(base, 'class', 'node_modules', '.bin') } })).toBe('npx cluster-workshop');
});

test('a clone: node with the absolute path of the bin, which works from any folder', () => {
  const root = fakePackage(join(base, 'my clone'));
  expect(cliName({ root, env: { PATH: '' } })).toBe(`node "${join(root, 'bin', 'cluster-workshop.js')}"`);
});

test('lesson texts and starters name the CLI only through {{cli}}, so every command in them is rendered', () => {
  for (const lesson of loadLessons()) {
    for (const file of [lesson.paths.text, lesson.paths.exercise]) {
      const text = readFileSync(file, 'utf8');
      expect({ file, literal: /npx cluster-workshop(?!@latest)/.test(text) }).toEqual({ file, literal: false });
    }
    expect(readFileSync(lesson.paths.exercise, 'utf8')).toContain('// Check it:  {{cli}} verify');
    expect(renderCli('{{cli}} verify 1 server.js', 'npx cluster-workshop')).toBe('npx cluster-workshop verify 1 server.js');
  }
});
