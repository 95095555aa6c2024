// The watcher of verify/shared/throttle.js (a thread of its own) pauses each
// new worker right after its 'online' for HOLD_MS, so 'listening' comes at
// least that long after 'online': what makes retiring on 'online' dip in
// every rolling restart. Without the hold the gap is tens of milliseconds.
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { holdNewWorkersAtOnline, HOLD_MS } from '../verify/shared/throttle.js';

const PRIMARY = `
const cluster = require('node:cluster');
const http = require('node:http');
if (cluster.isPrimary) {
  process.on('SIGUSR2', () => {
    const w = cluster.fork();
    let online;
    w.on('online', () => (online = Date.now()));
    w.on('listening', () => console.log(JSON.stringify({ pid: w.process.pid, gap: Date.now() - online })));
  });
  setInterval(() => {}, 1000);
  console.log('ready');
} else {
  http.createServer((req, res) => res.end()).listen(0);
}
`;

let dir;
let child;
beforeEach(() => {
  dir = mkdtempSync(join(tmpdir(), 'cw-hold-'));
  writeFileSync(join(dir, 'primary.cjs'), PRIMARY);
});
afterEach(() => {
  try {
    process.kill(-child.pid, 'SIGKILL');
  } catch {}
  rmSync(dir, { recursive: true, force: true });
});

const lines = (stream) => {
  const seen = [];
  const waiters = [];
  let buf = '';
  stream.on('data', (d) => {
    buf += d;
    let i;
    while ((i = buf.indexOf('\n')) >= 0) {
      seen.push(buf.slice(0, i));
      buf = buf.slice(i + 1);
      waiters.splice(0).forEach((w) => w());
    }
  });
  return async (match) => {
    for (;;) {
      const line = seen.find(match);
      if (line) return line;
      await new Promise((r) => waiters.push(r));
    }
  };
};

test('each new worker is held right after its online: listening comes at least HOLD_MS later', async () => {
  if (process.platform !== 'linux') return; // the hold reads /proc
  child = spawn(process.execPath, [join(dir, 'primary.cjs')], { detached: true, stdio: ['ignore', 'pipe', 'inherit'] });
  const next = lines(child.stdout);
  await next((l) => l === 'ready');
  const ctx = { program: { pid: child.pid }, onTeardown() {}, log() {} };
  const hold = await holdNewWorkersAtOnline(ctx, { initial: [] });
  const seen = [];
  for (let i = 0; i < 2; i++) {
    child.kill('SIGUSR2');
    const line = await next((l) => l.startsWith('{') && !seen.includes(l));
    seen.push(line);
  }
  await hold.stop();
  for (const line of seen) {
    const { pid, gap } = JSON.parse(line);
    expect({ pid, held: hold.held.get(pid)?.heldAt !== undefined, gapAtLeastHold: gap >= HOLD_MS - 50 }).toEqual({ pid, held: true, gapAtLeastHold: true });
  }
}, 30000);
