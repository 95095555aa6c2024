// Errors the CLI shows as one message with the fix, and their exit codes.
export const EXIT = { ok: 0, failed: 1, usage: 2, internal: 3 };

export class UsageError extends Error {
  constructor(message) {
    super(message);
    this.name = 'UsageError';
    this.exitCode = EXIT.usage;
  }
}
