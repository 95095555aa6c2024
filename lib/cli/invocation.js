// The commands the CLI prints, ready to paste in any folder of the workspace:
// how this copy of cluster-workshop is started (lib/invocation.js decides it
// from where the package lives), its arguments, and --dir when the learner
// gave one.
import { cliName, quote, renderCli } from '../invocation.js';

export { cliName, quote };

/** A full command line: cliName + args, with --dir when the learner gave one. */
export function commandLine(io, args, { dir } = {}) {
  const parts = [cliName({ env: io.env }), ...args.map(String)];
  if (dir !== undefined) parts.push('--dir', quote(dir));
  return parts.join(' ');
}

/** A lesson text or starter with its {{cli}} placeholders rendered for this learner. */
export function renderCommands(text, io) {
  return renderCli(text, cliName({ env: io.env }));
}
