// Errors the CLI shows as one message with the fix, and the exit codes:
// defined in the course layer (lib/course/exit.js), which decides a verify's
// code; re-exported here for the commands.
export { EXIT, UsageError, exitCodeForSignal } from '../course/exit.js';
