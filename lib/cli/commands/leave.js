import { UsageError, EXIT } from '../errors.js';

export const options = { dir: { type: 'string' } };
export const usage = `Usage: cluster-workshop leave [--dir <workspace>]

Stops reporting your verify results to a classroom. Results still queued are
sent first if the classroom answers within a moment, else discarded.

Exit code: 0 (also when you were in no classroom), 1 the join file could not be removed.`;

const LEAVE_BUDGET_MS = 2000;

export async function run(values, positionals, io) {
  if (positionals.length) throw new UsageError(`leave takes no arguments (got "${positionals[0]}").\n\n${usage}`);
  const { loadJoin, flushQueue, leaveClass, ClassroomError } = await import('../../classroom/client.js');
  const where = { dir: values.dir, env: io.env, cwd: io.cwd };
  let sent = 0;
  try {
    const joined = loadJoin(where);
    if (joined?.info.queue.length) sent = (await flushQueue(joined.info, { deadline: Date.now() + LEAVE_BUDGET_MS })).sent;
  } catch {
    // An unreadable join file is removed below all the same.
  }
  try {
    const { removed, unsent, info } = leaveClass(where);
    if (!removed.length) {
      io.out('You are not in a classroom; verify reports nowhere.\n');
      return EXIT.ok;
    }
    const left = Math.max(unsent - sent, 0);
    io.out(`You left ${info?.title ? `"${info.title}"` : 'the classroom'}; verify no longer reports.${sent ? ` ${sent} queued result(s) sent first.` : ''}${left ? ` ${left} unsent result(s) discarded.` : ''}\nRemoved ${removed.join(', ')}.\n`);
    return EXIT.ok;
  } catch (err) {
    if (!(err instanceof ClassroomError)) throw err;
    io.err(`${err.message}\n`);
    return EXIT.failed;
  }
}
