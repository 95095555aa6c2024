import { UsageError, EXIT } from '../errors.js';

export const options = { code: { type: 'string' }, name: { type: 'string' }, dir: { type: 'string' } };
export const usage = `Usage: cluster-workshop join <url> --code <code> --name <your name> [--dir <workspace>]

Joins your instructor's classroom: from now on every verify also reports its
outcome to the classroom (lesson, passed or not, the failed step, how long it
took, your attempt count, when). Never your code. A verify is never slowed or
changed by it: when the classroom cannot be reached, results wait in a queue
and go with a later verify. cluster-workshop leave stops it.

  <url>    the address your instructor shows, e.g. http://192.168.1.20:4100
  --code   the join code your instructor shows
  --name   how you appear on the instructor's screen (up to 40 characters)
  --dir    your workspace folder (default ./cluster-workshop)

The join is saved in classroom.json inside your workspace folder, or in
$XDG_CONFIG_HOME/cluster-workshop (default ~/.config/cluster-workshop) when
there is no workspace yet.

Exit code: 0 joined, 1 could not join (the message says why), 2 usage error.`;

export async function run(values, positionals, io) {
  const [url, ...extra] = positionals;
  if (!url) throw new UsageError(`Give the classroom address your instructor shows.\n\n${usage}`);
  if (extra.length) throw new UsageError(`Unexpected "${extra[0]}". A name with spaces needs quotes: --name "Ada Lovelace".\n\n${usage}`);
  if (!values.code) throw new UsageError(`Give the join code your instructor shows: --code <code>.\n\n${usage}`);
  if (!values.name) throw new UsageError(`Give your name as the instructor should see it: --name "<your name>".\n\n${usage}`);
  const { joinClass, ClassroomError } = await import('../../classroom/client.js');
  const { validateName } = await import('../../classroom/validate.js');
  const name = validateName(values.name);
  if (name.error) throw new UsageError(`--name: ${name.error}.`);
  try {
    const { file, info, previous, already, rejoined } = await joinClass({ url, code: values.code, name: name.value, dir: values.dir, env: io.env, cwd: io.cwd });
    if (already) {
      io.out(`You are already in "${info.title}" as ${info.name}; your join is kept in ${file}. cluster-workshop leave stops reporting.\n`);
      return EXIT.ok;
    }
    if (previous) {
      const unsent = previous.info.queue.length;
      io.out(`You left "${previous.info.title ?? previous.info.url}"${unsent ? ` (${unsent} unsent result(s) discarded)` : ''}.\n`);
    }
    io.out(`You joined "${info.title}" as ${info.name}${rejoined ? ' again: your earlier results are kept' : ''}.
Every verify now reports its outcome (lesson, passed or not, failed step, duration, attempts; never your code) to ${info.url}.
Saved in ${file}. cluster-workshop leave stops reporting.
`);
    return EXIT.ok;
  } catch (err) {
    if (!(err instanceof ClassroomError)) throw err;
    io.err(`${err.message}\n`);
    return EXIT.failed;
  }
}
