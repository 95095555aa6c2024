// Ctrl-C, SIGTERM and SIGHUP while a program of the learner runs: the first
// asks the command to stop it cleanly; a second one kills everything at once.
import { killAllNow } from '../harness/cleanup.js';
import { exitCodeForSignal } from './errors.js';

const SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'];

/** Calls onSignal(name) on the first signal; returns a function that removes the handlers. */
export function onInterrupt(onSignal) {
  let received = false;
  const handler = (signal) => {
    if (received) {
      killAllNow();
      process.exit(exitCodeForSignal(signal));
    }
    received = true;
    onSignal(signal);
  };
  for (const s of SIGNALS) process.on(s, handler);
  return () => {
    for (const s of SIGNALS) process.off(s, handler);
  };
}
