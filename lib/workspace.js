// The learner's workspace: a folder (./cluster-workshop by default) with one
// folder per started lesson (<id>/server.js, copied from the starter), the
// progress file, and what makes `node server.js` work there on its own:
//
// - package.json with "type": "module", because starters are ES modules;
// - node_modules/<dep>: a link (a junction on Windows, which needs no admin
//   rights) to each dependency of this package (express, ...) in the install
//   that runs the command.
//
// Why links and not copies or `npm install`: a classroom with poor network
// must not download anything, and a link costs nothing. Why per package and
// not one link for the whole node_modules: `npm install x` in the workspace
// must never write into the workshop's own install. npx installs into a cache
// folder that `npm cache clean` or a newer version can remove, so every
// command that uses the workspace re-points links that are dangling or aim
// at another install. The workspace package.json also lists the same
// dependencies, so `npm install` in the workspace replaces the links with
// real copies for a learner who wants the folder to stand alone. `verify`
// does not depend on any of this: its module fallback finds express anyway.
import { copyFileSync, existsSync, lstatSync, mkdirSync, readdirSync, readFileSync, realpathSync, renameSync, rmdirSync, symlinkSync, unlinkSync, writeFileSync } from 'node:fs';
import { dirname, isAbsolute, join, relative } from 'node:path';
import { PACKAGE_ROOT, PROGRAM_FILE, loadLessons } from './manifest.js';
import { CLI_PLACEHOLDER, cliName, renderCli } from './invocation.js';

export const WORKSPACE_PACKAGE_NAME = 'cluster-workshop-workspace';

/** Where a lesson's program lives in the workspace. */
export function lessonFolder(dir, lesson) {
  return join(dir, lesson.id);
}

export function lessonFile(dir, lesson) {
  return join(dir, lesson.id, PROGRAM_FILE);
}

/**
 * Workspaces made before lessons were named by id keep each lesson in a
 * numbered folder (02-fork/). Moves each such folder to its id (fork/) once,
 * when nothing is there yet, and returns one line per move (or per folder it
 * had to leave, with the reason), so nothing the learner wrote is lost or
 * left behind unseen. Progress was always keyed by id: it needs no change.
 */
export function moveLegacyLessonFolders(dir) {
  const lines = [];
  for (const lesson of loadLessons()) {
    const legacy = join(dir, lesson.legacyFolder);
    const target = join(dir, lesson.id);
    if (!existsSync(legacy)) continue;
    if (existsSync(target)) {
      lines.push(`${legacy} is from an older cluster-workshop; lesson ${lesson.id} now lives in ${target}, which already exists, so the old folder was left as it is.`);
      continue;
    }
    try {
      renameSync(legacy, target);
      lines.push(`Moved ${lesson.legacyFolder}/ to ${lesson.id}/ (lessons are now kept in folders named by id).`);
    } catch (err) {
      lines.push(`Could not move ${legacy} to ${target} (${err.code ?? err.message}); move it by hand.`);
    }
  }
  return lines;
}

function ownPackage() {
  return JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8'));
}

/** The folder of an installed package as Node would find it from this package (node_modules up the tree). */
export function installedPackageFolder(name, from = PACKAGE_ROOT) {
  for (let d = from; ; d = dirname(d)) {
    const candidate = join(d, 'node_modules', name);
    if (existsSync(join(candidate, 'package.json'))) return candidate;
    if (dirname(d) === d) return null;
  }
}

/**
 * Creates the workspace folder and what `node server.js` needs in it, and
 * repairs links that point nowhere. Returns warnings (never throws for a
 * link that cannot be made: verify still works without it).
 */
export function prepareWorkspace(dir) {
  mkdirSync(dir, { recursive: true });
  const warnings = [];
  const deps = Object.keys(ownPackage().dependencies ?? {});
  const pkgFile = join(dir, 'package.json');
  if (!existsSync(pkgFile)) {
    const own = ownPackage();
    const pkg = {
      name: WORKSPACE_PACKAGE_NAME,
      private: true,
      description: 'Your cluster-workshop programs and progress. Made by `cluster-workshop start`.',
      type: 'module',
      dependencies: Object.fromEntries(deps.map((d) => [d, own.dependencies[d]])),
    };
    writeFileSync(pkgFile, `${JSON.stringify(pkg, null, 2)}\n`);
  } else {
    // A folder of the learner's own (--dir .): never rewrite their package.json, but say what plain node needs.
    let type;
    try {
      type = JSON.parse(readFileSync(pkgFile, 'utf8')).type;
    } catch {
      type = undefined;
    }
    if (type !== 'module') {
      warnings.push(`${pkgFile} has no "type": "module", so plain \`node server.js\` reads the starters as CommonJS and stops at \`import\`. Add "type": "module" to it, or use a folder of its own: --dir cluster-workshop.`);
    }
  }
  const modules = join(dir, 'node_modules');
  for (const name of deps) {
    const target = installedPackageFolder(name);
    if (!target) continue;
    const link = join(modules, name);
    const state = linkState(link, target);
    if (state === 'ok' || state === 'real') continue; // 'real': the learner ran npm install; leave it
    try {
      if (state !== 'missing') removeLink(link);
      mkdirSync(dirname(link), { recursive: true });
      symlinkSync(target, link, 'junction');
    } catch (err) {
      warnings.push(
        `Could not link ${name} into ${modules} (${err.code ?? err.message}), so \`node server.js\` may not find it there; ` +
          `cluster-workshop verify still works. To fix it, run \`npm install\` in ${dir}.`,
      );
    }
  }
  return warnings;
}

// Removes a link, never what it points to (a Windows junction may need rmdir).
function removeLink(link) {
  try {
    unlinkSync(link);
  } catch {
    rmdirSync(link);
  }
}

/** 'missing', 'ok' (a link to target), 'stale' (a link elsewhere or dangling), or 'real' (a real folder). */
function linkState(link, target) {
  let st;
  try {
    st = lstatSync(link);
  } catch {
    return 'missing';
  }
  if (!st.isSymbolicLink()) return 'real';
  try {
    return realpathSync(link) === realpathSync(target) ? 'ok' : 'stale';
  } catch {
    return 'stale';
  }
}

/** The text of a lesson's starter file, its {{cli}} placeholders rendered with cli. */
export function starterText(lesson, cli = cliName()) {
  return renderCli(readFileSync(lesson.paths.exercise, 'utf8'), cli);
}

// A starter's header says how to check it (`// Check it:  <cli> verify ...`),
// rendered with the command that copied it. The same starter copied by
// another install (npx, then a global install) is still the starter.
const checkLine = /^(\/\/ Check it:\s+).+?( verify \S+ \S+)/gm;
const normalise = (s) => s.replace(/\r\n/g, '\n').replace(checkLine, `$1${CLI_PLACEHOLDER}$2`).trimEnd();

/** 'missing', 'starter' (unchanged), or 'edited'. */
export function fileState(dir, lesson) {
  const file = lessonFile(dir, lesson);
  if (!existsSync(file)) return 'missing';
  try {
    return normalise(readFileSync(file, 'utf8')) === normalise(readFileSync(lesson.paths.exercise, 'utf8')) ? 'starter' : 'edited';
  } catch {
    return 'edited';
  }
}

/** Whether the package ships the lesson's files yet (a course in progress may list lessons still being written). */
export function lessonAvailable(lesson) {
  return existsSync(lesson.paths.exercise) && existsSync(lesson.paths.verifier);
}

/**
 * Copies a lesson's starter folder into the workspace, {{cli}} rendered as
 * the command that starts this install (lib/invocation.js). Files that exist
 * are kept unless overwrite is true; an edited file that is overwritten is
 * kept as <name>.bak first. Returns { file, created, kept, backups, warnings }.
 */
export function copyStarter(dir, lesson, { overwrite = false, cli = cliName() } = {}) {
  const warnings = prepareWorkspace(dir);
  const folder = lessonFolder(dir, lesson);
  mkdirSync(folder, { recursive: true });
  const created = [];
  const kept = [];
  const backups = [];
  for (const rel of filesUnder(lesson.paths.exerciseDir)) {
    const from = join(lesson.paths.exerciseDir, rel);
    const to = join(folder, rel);
    const text = renderCli(readFileSync(from, 'utf8'), cli);
    if (existsSync(to)) {
      const same = normalise(readFileSync(to, 'utf8')) === normalise(text);
      if (same || !overwrite) {
        kept.push(to);
        continue;
      }
      const backup = `${to}.bak`;
      copyFileSync(to, backup);
      backups.push(backup);
    }
    mkdirSync(dirname(to), { recursive: true });
    writeFileSync(to, text);
    created.push(to);
  }
  return { file: lessonFile(dir, lesson), created, kept, backups, warnings };
}

function filesUnder(root, prefix = '') {
  const out = [];
  for (const entry of readdirSync(join(root, prefix), { withFileTypes: true })) {
    const rel = prefix ? join(prefix, entry.name) : entry.name;
    if (entry.isDirectory()) out.push(...filesUnder(root, rel));
    else if (entry.isFile()) out.push(rel);
  }
  return out.sort();
}

/** A path as the learner would type it from cwd: relative when inside cwd. */
export function shownPath(path, cwd = process.cwd()) {
  const rel = relative(cwd, path);
  return rel && !rel.startsWith('..') && !isAbsolute(rel) ? rel : path;
}
