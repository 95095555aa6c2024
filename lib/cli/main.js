// The command line: finds the command, parses its options, runs it, and is
// the one place that turns errors into messages and exit codes. Commands are
// imported only when used, so `list` and `--help` stay fast.
import { parseArgs } from 'node:util';
import { EXIT, UsageError } from './errors.js';

// name -> [module, one-line summary]
export const COMMANDS = {
  list: ['./commands/list.js', 'the lessons, with your status in each'],
  print: ['./commands/print.js', 'show a lesson text in the terminal'],
  start: ['./commands/start.js', "copy a lesson's starter into your workspace and make it current"],
  verify: ['./commands/verify.js', "check a program against a lesson's verifier"],
  hint: ['./commands/hint.js', 'the next hint for a lesson (the failed step first)'],
  solution: ['./commands/solution.js', "a lesson's reference solution (asks first if not passed)"],
  next: ['./commands/next.js', 'go on to the next lesson'],
  current: ['./commands/current.js', 'your current lesson, its file and status'],
  select: ['./commands/select.js', 'make another lesson your current one'],
  reset: ['./commands/reset.js', 'start a lesson (or with --all, the course) over'],
  run: ['./commands/run.js', 'start a program as the verifier would, and try it yourself'],
  watch: ['./commands/watch.js', 'verify your file again every time you save it'],
  bench: ['./commands/bench.js', 'measure requests per second: one process against the cluster'],
  doctor: ['./commands/doctor.js', 'check this machine is ready for the workshop'],
  classroom: ['./commands/classroom.js', 'instructors: run a live dashboard that learners report to'],
  join: ['./commands/join.js', "join an instructor's classroom: each verify reports its outcome"],
  leave: ['./commands/leave.js', 'stop reporting to a classroom'],
};

export function helpText() {
  const width = Math.max(...Object.keys(COMMANDS).map((n) => n.length));
  const rows = Object.entries(COMMANDS).map(([name, [, summary]]) => `  ${name.padEnd(width)}  ${summary}`);
  return `cluster-workshop: learn Node.js cluster by writing programs that a verifier really runs.

Usage: cluster-workshop <command> [options]
       cluster-workshop            (in a terminal: a menu to pick a lesson and act on it)

Commands:
${rows.join('\n')}

A lesson is named by number (3) or id (respawn). Every command takes --help.
Exit codes: 0 success, 1 verify failed, 2 usage error, 3 internal error.
`;
}

const FILE_SYSTEM_CODES = new Set(['EACCES', 'EPERM', 'EROFS', 'ENOSPC', 'ENOTDIR', 'EDQUOT']);

export async function main(argv, io = defaultIo()) {
  try {
    const [name, ...rest] = argv;
    if (!name) {
      // A terminal gets the menu; a pipe, a script or CI gets the list and the commands, never a prompt.
      // The menu runs commands through main, handed to it here (menu.js does not import this file).
      const menu = await import('./menu.js');
      const cli = { runCommand: (args) => main(args.map(String), io), helpText: helpText() };
      return io.interactive() ? menu.runMenu(io, cli) : menu.printOverview(io, cli);
    }
    if (name === '--help' || name === '-h' || name === 'help') {
      io.out(helpText());
      return EXIT.ok;
    }
    if (name === '--version' || name === '-v') {
      const { readFileSync } = await import('node:fs');
      const pkg = JSON.parse(readFileSync(new URL('../../package.json', import.meta.url), 'utf8'));
      io.out(`${pkg.version}\n`);
      return EXIT.ok;
    }
    const entry = COMMANDS[name];
    if (!entry) throw new UsageError(`Unknown command "${name}". Run ${(await import('../invocation.js')).cliName({ env: io.env })} --help to see the commands.`);
    const command = await import(entry[0]);
    let parsed;
    try {
      parsed = parseArgs({
        args: rest,
        options: { help: { type: 'boolean', short: 'h' }, ...command.options },
        allowPositionals: true,
        strict: true,
      });
    } catch (err) {
      throw new UsageError(`${optionProblem(err, name, command.options)}\n\n${command.usage}`);
    }
    if (parsed.values.help) {
      io.out(`${command.usage}\n`);
      return EXIT.ok;
    }
    return (await command.run(parsed.values, parsed.positionals, io)) ?? EXIT.ok;
  } catch (err) {
    // Asked for JSON (verify --json), a script gets JSON on stdout whatever went wrong; the words go to stderr too.
    const fail = (exitCode, kind, message) => {
      io.err(message);
      if (wantsJson(argv)) io.out(`${JSON.stringify({ passed: false, error: { kind, message: message.trim() }, exitCode }, null, 2)}\n`);
      return exitCode;
    };
    if (err instanceof UsageError) return fail(EXIT.usage, 'usage', `${err.message}\n`);
    // A folder the learner cannot write (a read-only home, a full disk) is not a bug: say which and what to do.
    if (FILE_SYSTEM_CODES.has(err?.code) && err.path) {
      return fail(EXIT.usage, 'file-system', `cluster-workshop cannot write ${err.path} (${err.code}${err.syscall ? ` on ${err.syscall}` : ''}).\nRun it in a folder you can write to, or choose one with --dir <folder>.\n`);
    }
    return fail(EXIT.internal, 'internal', `cluster-workshop hit an unexpected error. This is a bug: please report it with this output.\n${err?.stack ?? err}\n`);
  }
}

/** --json among the options (not after `--`, where it would be a file's name). */
const wantsJson = (argv) => {
  const end = argv.indexOf('--');
  return (end === -1 ? argv : argv.slice(0, end)).includes('--json');
};

/** parseArgs's complaint, in our words: which option, and the ones the command has. */
function optionProblem(err, command, options = {}) {
  const known = ['--help', ...Object.entries(options).map(([option, { type }]) => (type === 'string' ? `--${option} <value>` : `--${option}`))].join(', ');
  const option = /'(-[^' ]+)/.exec(err.message)?.[1];
  if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && option) {
    return `${command} has no option ${option}. Its options: ${known}.`;
  }
  if (err.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && option) {
    return options[option.replace(/^-+/, '')]?.type === 'string'
      ? `${option} needs a value, as in ${option} <value>.`
      : `${option} takes no value. Its options: ${known}.`;
  }
  return err.message;
}

export function defaultIo() {
  return {
    out: (s) => process.stdout.write(s),
    err: (s) => process.stderr.write(s),
    stdout: process.stdout,
    env: process.env,
    cwd: process.cwd(),
    interactive: () => Boolean(process.stdin.isTTY && process.stdout.isTTY) && !process.env.CI,
  };
}
