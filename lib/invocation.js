// How this copy of cluster-workshop is started, as a command a learner can
// paste in any folder of the workspace: the lesson texts, the starters'
// headers and every command the CLI prints use it. Decided from where the
// package lives (PACKAGE_ROOT), not from the command that happens to run now:
//
// - in npx's cache (`npx cluster-workshop`, `npx ./cluster-workshop-x.tgz`):
//   npx again, with what npx was given; a tarball or a folder by its absolute
//   path, through -p, since `npx ./x.tgz` only works in the folder holding it
//   and `npx /abs/x.tgz` runs the file itself ("Permission denied");
// - a global install (its bin shim on PATH): `cluster-workshop`;
// - any other node_modules (installed into the workspace or a folder above
//   it): `npx cluster-workshop`, which finds that install from every folder
//   below it, with no download and no "Ok to proceed?";
// - a clone: `node /abs/path/bin/cluster-workshop.js` (absolute, so it works
//   from a lesson folder too).
// Lives below lib/cli because the workspace renders starters with it.
import { existsSync, readFileSync, realpathSync } from 'node:fs';
import { delimiter, dirname, isAbsolute, join, resolve, sep } from 'node:path';
import { PACKAGE_ROOT } from './manifest.js';

export const PACKAGE_NAME = 'cluster-workshop';

/** The command that starts this cluster-workshop, e.g. `npx cluster-workshop`. */
export function cliName({ env = process.env, root = PACKAGE_ROOT } = {}) {
  const npxDir = npxCacheDir(root);
  if (npxDir) return npxCommand(npxDir);
  if (!insideNodeModules(root)) return `node ${quote(join(root, 'bin', 'cluster-workshop.js'))}`;
  if (globalShimOnPath(root, env)) return PACKAGE_NAME;
  return `npx ${PACKAGE_NAME}`;
}

export function quote(s) {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `"${s.replace(/(["\\$`])/g, '\\$1')}"`;
}

const npxCachePattern = /^(.*[\\/]_npx[\\/][^\\/]+)[\\/]node_modules[\\/]/;

function npxCacheDir(root) {
  return npxCachePattern.exec(root + sep)?.[1] ?? null;
}

function insideNodeModules(root) {
  return root.split(/[\\/]/).includes('node_modules');
}

/**
 * npx records what it was given in the package.json of its cache folder:
 * `_npx.packages` as typed, and in `dependencies` the same spec resolved
 * (a tarball or a folder as `file:` relative to that cache folder).
 */
function npxCommand(npxDir) {
  let pkg;
  try {
    pkg = JSON.parse(readFileSync(join(npxDir, 'package.json'), 'utf8'));
  } catch {
    return `npx ${PACKAGE_NAME}`;
  }
  const typed = (pkg._npx?.packages ?? []).find((p) => p.includes(PACKAGE_NAME)) ?? PACKAGE_NAME;
  const resolved = pkg.dependencies?.[PACKAGE_NAME] ?? '';
  if (resolved.startsWith('file:')) {
    const path = resolve(npxDir, resolved.slice('file:'.length));
    return `npx --yes -p ${quote(path)} ${PACKAGE_NAME}`;
  }
  if (isPathSpec(typed)) return `npx --yes -p ${quote(typed)} ${PACKAGE_NAME}`;
  return `npx ${quote(typed)}`;
}

function isPathSpec(spec) {
  return spec.startsWith('.') || isAbsolute(spec) || /\.(tgz|tar\.gz)$/.test(spec);
}

/**
 * A global install has a shim named cluster-workshop in a PATH folder: a link
 * to our bin (Unix: <prefix>/bin, package in <prefix>/lib/node_modules) or a
 * .cmd beside <prefix>/node_modules (Windows). node_modules/.bin folders are
 * skipped: npx and npm scripts put a local install's .bin on PATH, and
 * `cluster-workshop` alone would not work in the learner's own shell.
 */
function globalShimOnPath(root, env) {
  const real = (p) => {
    try {
      return realpathSync(p);
    } catch {
      return null;
    }
  };
  const ownRoot = real(root);
  for (const dir of (env.PATH ?? env.Path ?? '').split(delimiter)) {
    if (!dir || /[\\/]node_modules[\\/]\.bin[\\/]?$/.test(dir)) continue;
    const shims = [PACKAGE_NAME, `${PACKAGE_NAME}.cmd`].map((n) => join(dir, n)).filter((p) => existsSync(p));
    if (shims.length === 0) continue;
    const candidates = [
      ...shims.map((s) => dirname(dirname(real(s) ?? ''))),
      join(dir, 'node_modules', PACKAGE_NAME),
      join(dir, '..', 'lib', 'node_modules', PACKAGE_NAME),
    ];
    if (candidates.some((c) => real(c) === ownRoot)) return true;
  }
  return false;
}

/** Lesson texts and starters say {{cli}} where the command goes. */
export const CLI_PLACEHOLDER = '{{cli}}';

export function renderCli(text, cli = cliName()) {
  return text.replaceAll(CLI_PLACEHOLDER, cli);
}
