// The one way a step fails: what was expected, what happened, how to see it
// again, and what to change. The runner turns it into the step log and the
// JSON report's `detail`.
export class StepFailure extends Error {
  /**
   * @param {string} message one sentence: what did not hold
   * @param {object} [o]
   * @param {string} [o.expected]
   * @param {string} [o.actual]
   * @param {string} [o.explanation] why it matters or what the cause usually is
   * @param {string|string[]} [o.reproduce] commands that show it (curl, kill)
   * @param {string} [o.hint] what to change
   * @param {boolean} [o.showOutput] append the telltale lines of the program's output
   * @param {string[]} [o.outputLines] lines to show instead (the program's, or another's: say whose in outputTitle)
   * @param {string} [o.outputTitle] the heading of outputLines (default: the program's output)
   */
  constructor(message, o = {}) {
    super(message);
    this.name = 'StepFailure';
    this.expected = o.expected;
    this.actual = o.actual;
    this.explanation = o.explanation;
    this.reproduce = o.reproduce;
    this.hint = o.hint;
    this.showOutput = o.showOutput ?? false;
    this.outputLines = o.outputLines;
    this.outputTitle = o.outputTitle;
  }
}

export function fail(message, o) {
  throw new StepFailure(message, o);
}

/**
 * The plain-text explanation of a failure, used by both reporters.
 * @param {object} [o]
 * @param {string} [o.commandLine] how the program was started (`PORT=... node server.js`)
 * @param {number} [o.primaryPid] its pid in the run that just ended, shown as $pid in the commands
 */
export function formatFailure(failure, { commandLine, primaryPid } = {}) {
  const lines = [failure.message];
  if (failure.expected !== undefined) lines.push(`  expected: ${failure.expected}`);
  if (failure.actual !== undefined) lines.push(`  actual:   ${failure.actual}`);
  if (failure.explanation) lines.push(...wrap(failure.explanation).map((l) => `  ${l}`));
  const reproduce = reproduceCommands(failure, { commandLine, primaryPid });
  if (reproduce.length) {
    lines.push('  to see it yourself:');
    for (const cmd of reproduce) lines.push(`    ${cmd}`);
  }
  if (failure.hint) lines.push(...wrap(`hint: ${failure.hint}`).map((l) => `  ${l}`));
  if (failure.outputLines?.length) {
    lines.push(`  ${failure.outputTitle ?? "your program's output that shows it"}:`);
    for (const l of failure.outputLines) lines.push(`    | ${l}`);
  }
  return lines.join('\n');
}

// A pid where a command takes one: kill [-SIG] N, pgrep -P/-g N, ps ... -p N[,N].
const PID_ARGUMENT = /\b(kill(?:\s+-[A-Z0-9]+)?\s+-?|pgrep\s+-[Pg]\s+|ps\b[^|;&]*?-p\s+)(\d+(?:,\d+)*)\b/g;

/**
 * The "to see it yourself" commands, ready to paste in bash or zsh: every
 * URL quoted (zsh stops at an unquoted `?`), the start command first unless
 * the reproduction starts the program itself, and no pid of the run that
 * just ended presented as if it were the learner's: the primary's becomes
 * $pid (set by the start line); any other pid left (a worker's) is said to
 * be from that run.
 */
export function reproduceCommands(failure, { commandLine, primaryPid } = {}) {
  let cmds = [failure.reproduce ?? []].flat().filter(Boolean).map(quoteUrls);
  if (!cmds.length) return [];
  const startsItself = commandLine && cmds.some((cmd) => cmd.includes(commandLine));
  if (commandLine && !startsItself) {
    if (primaryPid && cmds.some((cmd) => mentionsPid(cmd))) {
      cmds = cmds.map((cmd) => cmd.replace(PID_ARGUMENT, (all, before, pids) => `${before}${pids.split(',').map((p) => (Number(p) === primaryPid ? '$pid' : p)).join(',')}`));
      cmds.unshift(`${commandLine} & pid=$!`);
    } else {
      cmds.unshift(`${commandLine} &`);
    }
  }
  if (cmds.some((cmd) => mentionsPid(cmd))) cmds.push('# the pids above are from the run that just ended: yours will differ');
  return cmds;
}

function mentionsPid(cmd) {
  PID_ARGUMENT.lastIndex = 0;
  const found = PID_ARGUMENT.test(cmd);
  PID_ARGUMENT.lastIndex = 0;
  return found;
}

/**
 * Single-quotes every http(s) URL that is not quoted yet. A URL ends at a
 * character the shell reads as the end of a word (`;`, `|`, `<`, `>`, `(`,
 * `)`, a backquote): `do curl -s URL; echo; done` keeps its `;` outside the
 * quotes. `&` stays inside: it separates query parameters, and a background
 * `&` is written after a space.
 */
export function quoteUrls(cmd) {
  return cmd.replace(/(^|[^'"\w])(https?:\/\/[^\s'"`;|<>()]+)/g, (all, before, url) => `${before}'${url}'`);
}

function wrap(text, width = 88) {
  const out = [];
  for (const paragraph of text.split('\n')) {
    let line = '';
    for (const word of paragraph.split(' ')) {
      if (line && line.length + word.length + 1 > width) {
        out.push(line);
        line = word;
      } else {
        line = line ? `${line} ${word}` : word;
      }
    }
    out.push(line);
  }
  return out;
}
