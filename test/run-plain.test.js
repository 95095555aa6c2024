// `run` without a terminal: it serves the program on the port asked for (or
// a free one when that is taken, saying so), relays the program's output and
// the cluster's events as plain lines, and SIGINT stops every process it
// started; a program that stops by itself makes it exit 1 with the cause.
import { copyFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import net from 'node:net';
import http from 'node:http';
import { findLesson } from '../lib/manifest.js';
import { request } from '../lib/harness/http.js';
import { isAlive, markedProcesses, workerPidsOf } from '../lib/harness/processes.js';
import { startCli } from './helpers/cli.js';


const startIn = (args, cwd) => startCli(args, { cwd, env: { NO_COLOR: '1' } });

/** Processes started by that CLI process (their run marker names it) that are still alive. */
const leftBy = (pid) => markedProcesses().filter((p) => Number(p.mark.split(':')[0]) === pid);

let dir;
beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'cw-run-'));
  copyFileSync(findLesson('respawn').paths.solution, join(dir, 'server.js'));
});

test('serves on a free port when the one asked for is taken, relays output and events, and SIGINT leaves nothing', async () => {
  const blocker = net.createServer();
  await new Promise((r) => blocker.listen(0, r));
  const taken = blocker.address().port;
  const cli = startIn(['run', 'respawn', 'server.js', '--port', String(taken)], dir);
  try {
    await cli.waitFor(new RegExp(`Port ${taken} is taken`));
    const [, port, primary] = (await cli.waitFor(/answers on http:\/\/127\.0\.0\.1:(\d+)\/\s+\(primary pid (\d+)\)/)).map(Number);
    expect(port).not.toBe(taken);
    expect(cli.out).toMatch(/PORT=\d+ WORKERS=3 node server\.js/); // the verifier's environment
    await cli.waitFor(/\[your program\] worker \d+ listening/);
    const r = await request(port, '/');
    expect(workerPidsOf(primary)).toContain(r.pid);
    await cli.waitFor(/\[cluster\] worker \d+ is listening/);
    expect(cli.out).toMatch(/curl -s 'http:\/\/127\.0\.0\.1:\d+\/heavy\?ms=\d+'/);

    cli.child.kill('SIGINT');
    expect(await cli.exited).toEqual({ code: 0, signal: null });
    expect(cli.out).toMatch(/Stopped: no process of your program is left/);
    expect(isAlive(primary)).toBe(false);
    expect(leftBy(cli.child.pid)).toEqual([]);
  } finally {
    cli.child.kill('SIGKILL');
    blocker.close();
  }
});

test('a program that exits by itself: says how, shows its last output, exits 1', async () => {
  writeFileSync(
    join(dir, 'quits.js'),
    // It exits a moment after its first answer (run's readiness probe), not
    // at a time from its start: on a loaded machine a start-up of 800 ms
    // left no answer before that time, and its exit came in the middle of
    // run's readiness checks instead of after them.
    `import http from 'node:http';
let answered = false;
http.createServer((q, r) => {
  r.end(JSON.stringify({ pid: process.pid }));
  if (answered) return;
  answered = true;
  setTimeout(() => { console.error('giving up now'); process.exit(3); }, 300);
}).listen(process.env.PORT);
`,
  );
  const cli = startIn(['run', '1', 'quits.js', '--port', '0'], dir);
  try {
    expect(await cli.exited).toEqual({ code: 1, signal: null });
    expect(cli.out).toMatch(/exited with code 3 by itself/);
    expect(cli.out).toMatch(/\| giving up now/);
    expect(leftBy(cli.child.pid)).toEqual([]);
  } finally {
    cli.child.kill('SIGKILL');
  }
});

test('a port taken between choosing it and the program\'s listen: run starts it again on another port, as verify does', async () => {
  // This program listens only on SIGUSR2, so the test takes its port first.
  copyFileSync(new URL('./fixtures/harness/listens-on-signal.js', import.meta.url).pathname, join(dir, 'on-signal.js'));
  const cli = startIn(['run', 'bottleneck', 'on-signal.js', '--port', '0'], dir);
  const stranger = http.createServer((req, res) => res.end(JSON.stringify({ pid: process.pid })));
  try {
    const [, firstPid, firstPort] = (await cli.waitFor(/booting pid=(\d+) port=(\d+)/)).map(Number);
    await new Promise((resolve) => stranger.listen(firstPort, resolve));
    process.kill(firstPid, 'SIGUSR2'); // its listen now fails with EADDRINUSE
    await cli.waitFor(new RegExp(`port ${firstPort} was taken by another program before yours listened on it; starting it again on another port`));
    const second = await cli.waitFor(new RegExp(`booting pid=(\\d+) port=(?!${firstPort}\\b)(\\d+)`));
    process.kill(Number(second[1]), 'SIGUSR2');
    const [, port] = (await cli.waitFor(/answers on http:\/\/127\.0\.0\.1:(\d+)\//)).map(Number);
    expect(port).toBe(Number(second[2]));
    expect((await request(port, '/')).pid).toBe(Number(second[1])); // the program, not the stranger
    cli.child.kill('SIGINT');
    expect(await cli.exited).toEqual({ code: 0, signal: null });
    expect(leftBy(cli.child.pid)).toEqual([]);
  } finally {
    cli.child.kill('SIGKILL');
    stranger.close();
  }
});
