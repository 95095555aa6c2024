// How the learner called us, so that the commands we print can be pasted as
// they are: `npx cluster-workshop ...` under npx, `cluster-workshop ...` when
// installed, `node bin/cluster-workshop.js ...` from a clone.
import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { PACKAGE_ROOT } from '../manifest.js';
import { shownPath } from '../workspace.js';

export function cliName(env = process.env, argv = process.argv, cwd = process.cwd()) {
  if (env.npm_command === 'exec') return `npx ${quote(npxSpec())}`;
  const script = argv[1] ?? '';
  if (basename(script) === 'cluster-workshop.js') return `node ${quote(shownPath(script, cwd))}`;
  return 'cluster-workshop';
}

/** A full command line: cliName + args, with --dir when the learner gave one. */
export function commandLine(io, args, { dir } = {}) {
  const parts = [cliName(io.env, io.argv, io.cwd), ...args.map(String)];
  if (dir !== undefined) parts.push('--dir', quote(dir));
  return parts.join(' ');
}

export function quote(s) {
  return /^[\w@%+=:,./-]+$/.test(s) ? s : `"${s.replace(/(["\\$`])/g, '\\$1')}"`;
}

/**
 * What the learner gave npx: `cluster-workshop`, or a version or a tarball
 * (`npx ./cluster-workshop-1.0.0.tgz` in a classroom), which npx records in
 * the package.json of its cache folder. Repeating plain `cluster-workshop`
 * there would download from the registry instead.
 */
function npxSpec(root = PACKAGE_ROOT) {
  const m = /^(.*[\\/]_npx[\\/][^\\/]+)[\\/]node_modules[\\/]/.exec(root);
  if (!m) return 'cluster-workshop';
  try {
    const packages = JSON.parse(readFileSync(join(m[1], 'package.json'), 'utf8'))._npx?.packages ?? [];
    return packages.find((p) => p.includes('cluster-workshop')) ?? 'cluster-workshop';
  } catch {
    return 'cluster-workshop';
  }
}
