// Blind-authored (written from the lesson text alone), author's note:
// Before forking, the primary "waits a second for the system to settle" with
// a busy-wait on a flag that a setTimeout should set: `while (!settled) {}`.
// The timer can never fire while the loop holds the thread, so it spins forever.
// expect: fail at starts
// expect-text: busy
// ready-timeout: 4000
import cluster from 'node:cluster';
import http from 'node:http';
import os from 'node:os';

const PORT = Number(process.env.PORT);

if (cluster.isPrimary) {
  const n = Number(process.env.WORKERS) || os.availableParallelism();

  let settled = false;
  setTimeout(() => { settled = true; }, 1000);
  console.log('primary: waiting for the system to settle...');
  while (!settled) {
    // wait
  }

  for (let i = 0; i < n; i++) cluster.fork();
} else {
  http.createServer((req, res) => {
    const url = new URL(req.url, 'http://x');
    res.setHeader('content-type', 'application/json');
    if (url.pathname === '/heavy') {
      const ms = Number(url.searchParams.get('ms')) || 0;
      const t = Date.now();
      while (Date.now() - t < ms);
      return res.end(JSON.stringify({ pid: process.pid, ms }));
    }
    res.end(JSON.stringify({ pid: process.pid }));
  }).listen(PORT);
}
