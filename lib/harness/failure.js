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
  }
}

export function fail(message, o) {
  throw new StepFailure(message, o);
}

/** The plain-text explanation of a failure, used by both reporters. */
export function formatFailure(failure, { commandLine } = {}) {
  const lines = [failure.message];
  if (failure.expected !== undefined) lines.push(`  expected: ${failure.expected}`);
  if (failure.actual !== undefined) lines.push(`  actual:   ${failure.actual}`);
  if (failure.explanation) lines.push(...wrap(failure.explanation).map((l) => `  ${l}`));
  const reproduce = [failure.reproduce ?? []].flat().filter(Boolean);
  if (reproduce.length) {
    lines.push('  to see it yourself:');
    // The start command comes first, unless the reproduction already starts it.
    if (commandLine && !reproduce.some((cmd) => cmd.includes(commandLine))) lines.push(`    ${commandLine} &`);
    for (const cmd of reproduce) lines.push(`    ${cmd}`);
  }
  if (failure.hint) lines.push(...wrap(`hint: ${failure.hint}`).map((l) => `  ${l}`));
  if (failure.outputLines?.length) {
    lines.push("  your program's output that shows it:");
    for (const l of failure.outputLines) lines.push(`    | ${l}`);
  }
  return lines.join('\n');
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
