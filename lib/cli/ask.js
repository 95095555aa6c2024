// Yes/no questions for commands that would discard work or spoil a lesson.
// inquirer is imported only here, when a question is really asked.
import { UsageError } from './errors.js';

/**
 * Asks a yes/no question (default no). Without a terminal it never waits:
 * it throws a UsageError that says which flag answers it in a script.
 */
export async function confirm(io, message, { flag = '--yes', command } = {}) {
  if (!io.interactive()) {
    throw new UsageError(`${message}\nNo terminal to ask in, so nothing was done. To answer yes in a script, run it again with ${flag}${command ? `: ${command}` : '.'}`);
  }
  const { default: inquirer } = await import('inquirer');
  try {
    const { ok } = await inquirer.prompt([{ type: 'confirm', name: 'ok', message, default: false }]);
    return ok;
  } catch (err) {
    if (err?.name === 'ExitPromptError' || err?.name === 'AbortPromptError') return false; // Ctrl-C means no
    throw err;
  }
}
