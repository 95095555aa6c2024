// The advice beside Node's own lines when a program cannot start: fed with
// what Node really prints (a CommonJS file in a "type": "module" folder, as
// the workspace is), and with failures it has no advice for.
import { spawnSync } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { startFailureAdvice } from '../lib/harness/start-failure-advice.js';
import { removeDir, tempDir } from './helpers/cli.js';

let dir;
beforeAll(() => {
  dir = tempDir('cw-advice-');
  writeFileSync(join(dir, 'package.json'), '{ "type": "module" }\n');
});
afterAll(() => removeDir(dir));

function outputOf(name, source) {
  const file = join(dir, name);
  writeFileSync(file, source);
  const r = spawnSync(process.execPath, [file], { cwd: dir, encoding: 'utf8' });
  return { code: r.status, lines: `${r.stdout}${r.stderr}`.split('\n') };
}

test('require in a .js file of a "type": "module" folder: rename it to .cjs, or use import', () => {
  const { code, lines } = outputOf('server.js', "const os = require('node:os');\nconsole.log(os.cpus().length);\n");
  expect(code).not.toBe(0);
  const advice = startFailureAdvice(lines);
  expect(advice).toContain('CommonJS (it uses require)');
  expect(advice).toContain(`${join(dir, 'package.json')} says "type": "module"`);
  expect(advice).toContain('.cjs');
  expect(advice).toContain("import x from 'x'");
});

test('module.exports and __dirname are named too', () => {
  expect(startFailureAdvice(outputOf('exports.js', 'module.exports = {};\n').lines)).toContain('it uses module');
  expect(startFailureAdvice(outputOf('dirname.js', 'console.log(__dirname);\n').lines)).toContain('import.meta.dirname');
});

test('the advice is right: the same code as .cjs runs', () => {
  const { code } = outputOf('server.cjs', "const os = require('node:os');\nconsole.log(os.cpus().length);\n");
  expect(code).toBe(0);
});

test('no advice for other failures (an error of the program, a syntax error, a missing package)', () => {
  expect(startFailureAdvice(outputOf('throws.js', "throw new Error('boom');\n").lines)).toBeNull();
  expect(startFailureAdvice(outputOf('syntax.js', 'const = 1;\n').lines)).toBeNull();
  expect(startFailureAdvice(outputOf('missing.js', "import x from 'no-such-package-here';\n").lines)).toBeNull();
});

test('an .mjs file is an ES module by its name: no package.json is blamed, import is the fix', () => {
  const advice = startFailureAdvice(outputOf('server.mjs', "const os = require('node:os');\n").lines);
  expect(advice).not.toContain('package.json');
  expect(advice).toContain("Replace require('x') with import x from 'x'");
});
