// Imported first by server.js: the lesson allows the CRASH_FILE check "in a module
// imported first". It runs before express is even loaded.
import { statSync } from 'node:fs';

const crashFile = process.env.CRASH_FILE;
if (crashFile) {
  let present = false;
  try {
    statSync(crashFile);
    present = true;
  } catch {
    present = false;
  }
  if (present) {
    console.error(`instance ${process.pid}: found CRASH_FILE at ${crashFile}, refusing to start`);
    process.exit(1); // not throw: under PM2 a throw in an ES module does not end the instance
  }
}
