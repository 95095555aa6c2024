#!/usr/bin/env node
// `npm test`: the whole suite, in two jest processes at once. The fixture
// catalogue of the lessons that wait on PM2 and nginx (test/mistakes-daemons.test.js,
// about a third of the suite's time, most of it spent waiting on those
// daemons) runs beside everything else, at a lower CPU priority (nice 10),
// so that on two cores the other verdicts keep the CPU they get when run
// alone, and the daemon lessons take what is left. With arguments
// (`npm test -- test/course.test.js`), one jest process runs just those.
import { spawn } from 'node:child_process';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

const root = fileURLToPath(new URL('..', import.meta.url));
const jest = ['--experimental-vm-modules', 'node_modules/jest/bin/jest.js'];
const SIDE = 'test/mistakes-daemons.test.js';

const args = process.argv.slice(2);
const runs = args.length
  ? [{ command: process.execPath, args: [...jest, ...args] }]
  : [
      { command: process.execPath, args: [...jest, '--testPathIgnorePatterns', SIDE] },
      { command: 'nice', args: ['-n', '10', process.execPath, ...jest, SIDE], prefix: '[daemons] ' },
    ];

const children = [];
const finished = runs.map(({ command, args: a, prefix }) => {
  const child = spawn(command, a, { cwd: root, stdio: prefix ? ['ignore', 'pipe', 'pipe'] : 'inherit' });
  if (prefix) {
    // Line by line, so that the two processes' lines do not run into each other.
    for (const [from, to] of [[child.stdout, process.stdout], [child.stderr, process.stderr]]) {
      createInterface({ input: from }).on('line', (line) => to.write(`${prefix}${line}\n`));
    }
  }
  children.push(child);
  return new Promise((resolve) => child.on('close', (code) => resolve(code ?? 1)));
});

// A stop (Ctrl-C, or CI's SIGTERM) reaches both: each jest ends its
// verifiers and their processes. (`nice` executes jest in its own place.)
for (const signal of ['SIGINT', 'SIGTERM']) {
  process.on(signal, () => {
    for (const child of children) child.kill(signal);
  });
}

const codes = await Promise.all(finished);
process.exitCode = codes.some((code) => code !== 0) ? 1 : 0;
