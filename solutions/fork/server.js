// The fork lesson (fork): the primary forks WORKERS workers that share one port.
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

// WORKERS decides the count; a fixed number would ignore the machine it runs on.
const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;

if (cluster.isPrimary) {
  // The primary only forks: it serves nothing, so a slow request never blocks it.
  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) cluster.fork();
} else {
  const app = express();

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/heavy', (req, res) => {
    const ms = Math.min(Number(req.query.ms) || 100, 10_000);
    const end = Date.now() + ms;
    while (Date.now() < end) {
      // burn: only this worker is blocked, the others keep answering
    }
    res.json({ pid: process.pid, ms });
  });

  // Every worker listens on the same port: the primary holds the socket and
  // hands each new connection to a worker.
  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });
}
