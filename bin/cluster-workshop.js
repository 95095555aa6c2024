#!/usr/bin/env node
import { main } from '../lib/cli/main.js';

// `cluster-workshop list | head` closes the pipe early: that is not an error.
process.stdout.on('error', (err) => {
  if (err.code === 'EPIPE') process.exit(0);
  throw err;
});

main(process.argv.slice(2)).then((code) => {
  process.exitCode = code;
});
