// A state file (or its journal, or its lock) that stops a classroom from
// starting: the message says what is wrong and what to do; the CLI shows it
// with exit code 2 and no stack trace.
export class StateFileError extends Error {
  constructor(message) {
    super(message);
    this.name = 'StateFileError';
  }
}
