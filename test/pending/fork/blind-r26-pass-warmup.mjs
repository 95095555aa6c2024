// Blind-authored (written from the lesson text alone), author's note:
// ESM, node:http only. Each worker does ~1.5 s of real synchronous start-up
// work (pbkdf2Sync "pre-hashing" a lookup table) BEFORE it listens on PORT;
// the primary forks WORKERS (fallback os.availableParallelism()) and serves nothing.
// expect: pass
import cluster from 'node:cluster';
import http from 'node:http';
import os from 'node:os';
import crypto from 'node:crypto';

const port = Number(process.env.PORT) || 3000;

if (cluster.isPrimary) {
  const n = Number.parseInt(process.env.WORKERS ?? '', 10) || os.availableParallelism();
  console.log(`primary ${process.pid}: forking ${n} workers`);
  for (let i = 0; i < n; i++) cluster.fork();
  cluster.on('exit', (w, code, signal) => {
    console.log(`worker ${w.process.pid} exited (${signal || code})`);
  });
} else {
  // warm-up: build a table of derived keys, takes roughly 1.5 s of CPU
  const started = Date.now();
  const table = new Map();
  for (let i = 0; Date.now() - started < 1500; i++) {
    table.set(i, crypto.pbkdf2Sync(`user${i}`, 'salt', 2000, 32, 'sha256').toString('hex'));
  }
  console.log(`worker ${process.pid}: warmed ${table.size} keys in ${Date.now() - started} ms`);

  const send = (res, status, body) => {
    res.writeHead(status, { 'content-type': 'application/json' });
    res.end(JSON.stringify(body));
  };

  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://localhost');
    if (req.method === 'GET' && url.pathname === '/') {
      return send(res, 200, { pid: process.pid });
    }
    if (req.method === 'GET' && url.pathname === '/heavy') {
      const ms = Number(url.searchParams.get('ms')) || 0;
      const end = Date.now() + ms;
      while (Date.now() < end) { /* burn the CPU */ }
      return send(res, 200, { pid: process.pid, ms });
    }
    send(res, 404, { pid: process.pid, error: 'not found' });
  });

  server.listen(port, () => console.log(`worker ${process.pid} listening on ${port}`));
}
