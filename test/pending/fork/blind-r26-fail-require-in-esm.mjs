// Blind-authored (written from the lesson text alone), author's note:
// ESM file (.mjs). The primary branch is fine and forks WORKERS workers, but the
// worker branch pastes old CommonJS code: `const http = require('http')`. In ES
// modules `require` is not defined, so every worker throws at start-up and exits 1.
// expect: fail at starts
// expect-text: workers exited
// ready-timeout: 4000
import cluster from 'node:cluster';
import os from 'node:os';

if (cluster.isPrimary) {
  const n = Number(process.env.WORKERS) || os.availableParallelism();
  console.log(`primary ${process.pid} forking ${n} workers`);
  for (let i = 0; i < n; i++) cluster.fork();
  cluster.on('exit', (worker, code) => {
    console.log(`worker ${worker.process.pid} died with code ${code}`);
  });
} else {
  const http = require('http');
  http.createServer((req, res) => {
    const { pathname, searchParams } = new URL(req.url, 'http://localhost');
    res.setHeader('Content-Type', 'application/json');
    if (pathname === '/heavy') {
      const ms = Number(searchParams.get('ms')) || 0;
      const end = Date.now() + ms;
      while (Date.now() < end) {}
      return res.end(JSON.stringify({ pid: process.pid, ms }));
    }
    res.end(JSON.stringify({ pid: process.pid }));
  }).listen(Number(process.env.PORT));
}
