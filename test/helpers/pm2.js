// PM2 for the tests of the process-manager lesson. The workshop does not
// depend on PM2 (AGPL-3.0): a learner installs it in the workspace, and the
// verifier runs the PM2 it finds from the program's folder. The tests do the
// same: each program runs from a temporary workspace whose node_modules links
// a PM2 installed outside the repository (.ci/run installs it):
//   npm install --prefix ~/.cache/cluster-workshop/pm2 pm2@7
// CW_PM2_DIR names another install (the folder that holds pm2's package.json).
import { cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, symlinkSync, writeFileSync } from 'node:fs';
import { homedir, tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';

const REPO_ROOT = fileURLToPath(new URL('../../', import.meta.url));
export const PM2_CACHE = join(homedir(), '.cache', 'cluster-workshop', 'pm2');

/** The folder of the PM2 the tests use; throws, saying how to install it, when there is none. */
export function pm2Dir() {
  const dir = process.env.CW_PM2_DIR ?? join(PM2_CACHE, 'node_modules', 'pm2');
  if (!existsSync(join(dir, 'package.json'))) {
    throw new Error(`The process-manager tests need PM2 at ${dir}: npm install --prefix ${PM2_CACHE} pm2@7 (or set CW_PM2_DIR). .ci/run installs it.`);
  }
  return dir;
}

/**
 * A temporary workspace as a learner's looks after `npm install pm2` and of
 * the libraries their server uses: package.json ("type": "module"),
 * node_modules/pm2 and a link to each package the workshop's package.json
 * names (express; http-terminator, @godaddy/terminus and the other libraries
 * blind-authored programs use). Returns its folder; the caller removes it.
 */
export function makePm2Workspace(root = mkdtempSync(join(tmpdir(), 'cw-pm2-ws-'))) {
  mkdirSync(join(root, 'node_modules'), { recursive: true });
  writeFileSync(join(root, 'package.json'), `${JSON.stringify({ type: 'module', private: true })}\n`);
  const link = (name, target) => {
    const at = join(root, 'node_modules', name);
    if (!existsSync(at)) symlinkSync(target, at, 'junction');
  };
  link('pm2', pm2Dir());
  const { dependencies = {}, devDependencies = {} } = JSON.parse(readFileSync(join(REPO_ROOT, 'package.json'), 'utf8'));
  for (const name of Object.keys({ ...dependencies, ...devDependencies })) {
    if (name.includes('/')) mkdirSync(join(root, 'node_modules', dirname(name)), { recursive: true });
    link(name, join(REPO_ROOT, 'node_modules', name));
  }
  return root;
}

/** A copy of a lesson folder (server.js and its ecosystem file) inside a PM2 workspace; returns the copied server.js. */
export function copyIntoPm2Workspace(folder, name, root) {
  const ws = makePm2Workspace(root);
  const dir = join(ws, name);
  cpSync(folder, dir, { recursive: true });
  return join(dir, 'server.js');
}

export const lessonNeedsPm2 = (lesson) => Boolean(lesson?.needs?.includes('pm2'));
export { dirname };
