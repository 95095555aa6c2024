// A learner's program runs under the verifier exactly as under `node <file>`,
// also in a folder that cannot resolve the lesson's packages (no
// node_modules): a CommonJS program gets NODE_PATH and nothing else (no
// preload, which would defer its main module by a turn of the event loop and
// lose a message its primary sends on 'online'); an ES module gets the
// resolve hook, since ESM ignores NODE_PATH.
import { copyFileSync, mkdtempSync, mkdirSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { runVerifier } from '../lib/harness/runner.js';
import { TextReporter } from '../lib/cli/reporter.js';
import { fallbackFor, moduleTypeOf } from '../lib/harness/module-fallback.js';
import { findLesson } from '../lib/manifest.js';
import { leftovers, verdictOf, PASSED } from './helpers/verify.js';

const FIXTURES = new URL('./fixtures/harness/', import.meta.url).pathname;
const lesson = { id: 'harness', number: 0, title: 'harness test', packages: ['express'] };

let dir;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cw-no-modules-'));
});
afterAll(() => rmSync(dir, { recursive: true, force: true }));

async function verify(file, verifier) {
  let log = '';
  const reporter = new TextReporter({ write: (s) => (log += s) });
  const report = await runVerifier({ lesson, file, verifier, reporter, readyTimeoutMs: 8000 });
  return { report, log };
}

test('a CommonJS cluster that needs a message sent on online passes from a folder with no node_modules, started with NODE_PATH and no preload', async () => {
  const file = join(dir, 'early-message.cjs');
  copyFileSync(join(FIXTURES, 'early-message.cjs'), file);
  const fallback = fallbackFor(file, lesson.packages);
  expect(fallback.execArgv).toEqual([]);
  expect(fallback.env.NODE_PATH).toMatch(/node_modules/);

  const verifier = {
    env: { WORKERS: '2' },
    steps: [
      {
        id: 'config-arrived',
        title: 'every worker got the config',
        async run(ctx) {
          const { pids, results } = await ctx.reachWorkers('/', { count: 2 });
          ctx.log(`answered by ${[...pids.keys()].join(', ')}`);
          if (pids.size !== 2 || results.some((r) => r.json?.config?.greeting !== 'hello')) ctx.fail('a worker answered without the config');
        },
      },
    ],
  };
  const result = await verify(file, verifier);
  expect(verdictOf(result)).toMatch(PASSED);
  expect(leftovers()).toEqual([]);
});

test('an ES module that imports express from a folder with no node_modules still runs (through the resolve hook)', async () => {
  const file = join(dir, 'express.mjs');
  writeFileSync(
    file,
    "import express from 'express';\nconst app = express();\napp.get('/', (req, res) => res.json({ pid: process.pid }));\napp.listen(Number(process.env.PORT));\n",
  );
  expect(fallbackFor(file, lesson.packages).execArgv).toEqual(['--import', expect.stringMatching(/module-fallback-register\.js$/)]);
  const result = await verify(file, { clustered: false, steps: [] });
  expect(verdictOf(result)).toMatch(PASSED);
  expect(leftovers()).toEqual([]);
});

test('nothing is added where the folder resolves every package of the lesson', () => {
  const redis = findLesson('redis-state');
  expect(redis.packages).toEqual(expect.arrayContaining(['express', 'ioredis', 'express-session', 'connect-redis']));
  expect(fallbackFor(findLesson('fork').paths.solution, findLesson('fork').packages)).toEqual({ execArgv: [], env: {} });
  expect(fallbackFor(redis.paths.solution, redis.packages)).toEqual({ execArgv: [], env: {} });
  // A package the folder cannot resolve makes it need the fallback.
  expect(fallbackFor(findLesson('fork').paths.solution, ['no-such-package-here']).execArgv).toHaveLength(2);
});

describe('moduleTypeOf: how node <file> runs it', () => {
  const write = (name, text, pkg) => {
    const folder = mkdtempSync(join(dir, 'type-'));
    if (pkg) writeFileSync(join(folder, 'package.json'), JSON.stringify(pkg));
    mkdirSync(folder, { recursive: true });
    const file = join(folder, name);
    writeFileSync(file, text);
    return file;
  };
  test.each([
    ['.mjs is a module', 'a.mjs', 'const x = 1;', { type: 'commonjs' }, 'module'],
    ['.cjs is CommonJS', 'a.cjs', 'import x from "y";', { type: 'module' }, 'commonjs'],
    ['.js follows "type": "module"', 'a.js', 'const x = require("y");', { type: 'module' }, 'module'],
    ['.js follows "type": "commonjs"', 'a.js', 'const x = 1;', { type: 'commonjs' }, 'commonjs'],
    ['.js with no type and require is CommonJS', 'a.js', 'const x = require("y");', {}, 'commonjs'],
    ['.js with no type and import syntax is a module (Node detects it)', 'a.js', 'import x from "y";\n', {}, 'module'],
    ['.js with no type and top-level await is a module', 'a.js', 'await Promise.resolve();\n', {}, 'module'],
    ['.js with no type and a syntax error stays CommonJS (Node reports the error)', 'a.js', 'const = ;\n', {}, 'commonjs'],
  ])('%s', (_, name, text, pkg, expected) => {
    expect(moduleTypeOf(write(name, text, pkg))).toBe(expected);
  });
});
