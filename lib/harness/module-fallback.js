// Lets a learner's file import the packages this workshop ships (express,
// ...) from wherever the file lives. CommonJS `require` honours NODE_PATH;
// ES modules do not, so an ESM resolve hook retries a bare specifier that
// failed from the package's own folder.
import { createRequire } from 'node:module';
import { dirname, join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const require = createRequire(import.meta.url);
const PACKAGE_ROOT = join(dirname(fileURLToPath(import.meta.url)), '..', '..');

/** The node_modules folder that holds this package's dependencies. */
export function dependencyFolder() {
  const expressPkg = require.resolve('express/package.json');
  return dirname(dirname(expressPkg));
}

// The packages lesson programs import; each must resolve from the learner's folder.
const LESSON_PACKAGES = ['express', 'ioredis', 'express-session', 'connect-redis'];

function resolvesFrom(folder, specifier) {
  try {
    createRequire(join(folder, 'noop.js')).resolve(specifier);
    return true;
  } catch {
    return false;
  }
}

/**
 * Node arguments and environment that make the lesson packages (express,
 * ioredis, ...) importable from a file in `folder`. Nothing is added when
 * the folder already resolves them all (the
 * workshop's own exercises, a workspace with node_modules), which keeps the
 * learner's program started exactly as `node <file>`.
 */
export function fallbackFor(folder, env = process.env) {
  if (LESSON_PACKAGES.every((name) => resolvesFrom(folder, name))) return { execArgv: [], env: {} };
  const deps = dependencyFolder();
  const nodePath = [deps, env.NODE_PATH].filter(Boolean).join(process.platform === 'win32' ? ';' : ':');
  const hook = pathToFileURL(join(PACKAGE_ROOT, 'lib', 'harness', 'module-fallback-register.js')).href;
  return { execArgv: ['--import', hook], env: { NODE_PATH: nodePath } };
}
