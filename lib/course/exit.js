// Exit codes, one table for every command (README.md, "Exit codes"), and the
// error that carries the usage code. The course layer decides the code of a
// verify; the CLI turns errors into messages.
import { constants } from 'node:os';

export const EXIT = { ok: 0, failed: 1, usage: 2, internal: 3 };

/** A request that cannot be done as asked: the message says what to type instead. Exit 2. */
export class UsageError extends Error {
  constructor(message) {
    super(message);
    this.name = 'UsageError';
    this.exitCode = EXIT.usage;
  }
}

/**
 * The shell's convention for a command stopped by a signal: 128 + its number
 * (Ctrl-C 130, SIGTERM 143, SIGHUP 129). A reason that is not a signal (watch
 * cancels a run because the file changed) gives 128.
 */
export function exitCodeForSignal(signal) {
  return 128 + (constants.signals[signal] ?? 0);
}
