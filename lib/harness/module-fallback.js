// Lets a learner's file import the packages its lesson allows (express, ...)
// from wherever the file lives, without changing how the program runs: a
// verifier runs it exactly as `node <file>` would.
//
// - A folder that resolves every package (the workshop's own exercises, a
//   workspace with node_modules): nothing is added.
// - A CommonJS program: NODE_PATH only. `require` honours NODE_PATH, and no
//   preload runs, so the main module starts in the same turn of the event
//   loop as under plain node (a preload defers it by a turn, and a message
//   the primary sends on 'online' or right after fork() would be lost in a
//   worker whose top-level listener was not there yet).
// - An ES module: NODE_PATH for the CommonJS files it may start, and the
//   resolve hook of module-fallback-hooks.js with --import, because ESM
//   ignores NODE_PATH. Only then is a preload added.
//
// The package list is the lesson's (lessons/manifest.json "packages"),
// handed in by the caller: the harness knows no lesson.
import { createRequire } from 'node:module';
import { existsSync, readFileSync } from 'node:fs';
import { dirname, extname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import vm from 'node:vm';

const require = createRequire(import.meta.url);
const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The node_modules folder that holds this package's dependencies. */
export function dependencyFolder() {
  const expressPkg = require.resolve('express/package.json');
  return dirname(dirname(expressPkg));
}

function resolvesFrom(folder, specifier) {
  try {
    createRequire(join(folder, 'noop.js')).resolve(specifier);
    return true;
  } catch {
    return false;
  }
}

/** The "type" field of the package.json nearest to the file, or undefined when none says. */
function packageTypeOf(file) {
  for (let dir = dirname(file); ; dir = dirname(dir)) {
    const pkg = join(dir, 'package.json');
    if (existsSync(pkg)) {
      try {
        return JSON.parse(readFileSync(pkg, 'utf8')).type;
      } catch {
        return undefined; // Node fails on a broken package.json itself, with its own message
      }
    }
    if (dirname(dir) === dir) return undefined;
  }
}

// Node (>= 20.19) runs a .js file with no "type" to say as an ES module when
// it does not compile as CommonJS because of ES module syntax.
const ESM_ONLY_SYNTAX = /Cannot use import statement outside a module|Unexpected token 'export'|Cannot use 'import\.meta' outside a module|await is only valid in async functions/;

function hasModuleSyntax(source) {
  try {
    // Compiled as Node compiles a CommonJS module (inside its wrapper), never run.
    new vm.Script(`(function (exports, require, module, __filename, __dirname) {${source}\n})`);
    return false;
  } catch (err) {
    return ESM_ONLY_SYNTAX.test(String(err?.message));
  }
}

/**
 * 'module' or 'commonjs': how `node <file>` runs it. .mjs and .cjs say it;
 * a .js file follows the nearest package.json "type"; with none, Node
 * detects ES module syntax.
 */
export function moduleTypeOf(file) {
  const ext = extname(file);
  if (ext === '.mjs') return 'module';
  if (ext === '.cjs') return 'commonjs';
  const type = packageTypeOf(file);
  if (type === 'module') return 'module';
  if (type === 'commonjs') return 'commonjs';
  try {
    return hasModuleSyntax(readFileSync(file, 'utf8')) ? 'module' : 'commonjs';
  } catch {
    return 'commonjs';
  }
}

/**
 * Node arguments and environment that make `packages` importable from the
 * learner's file (see the top of this file for what each kind of program gets).
 *
 * @param {string} file absolute path of the learner's program
 * @param {string[]} packages the lesson's packages (manifest "packages")
 */
export function fallbackFor(file, packages = [], env = process.env) {
  const folder = dirname(file);
  if (packages.every((name) => resolvesFrom(folder, name))) return { execArgv: [], env: {} };
  const nodePath = [dependencyFolder(), env.NODE_PATH].filter(Boolean).join(process.platform === 'win32' ? ';' : ':');
  if (moduleTypeOf(file) === 'commonjs') return { execArgv: [], env: { NODE_PATH: nodePath } };
  const hook = pathToFileURL(join(PACKAGE_ROOT, 'lib', 'harness', 'module-fallback-register.js')).href;
  return { execArgv: ['--import', hook], env: { NODE_PATH: nodePath } };
}
