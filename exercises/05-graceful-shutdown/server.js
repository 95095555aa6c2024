// Lesson 5 (graceful-shutdown): on SIGTERM or Ctrl-C, stop taking new
// connections, finish the requests in flight, then exit 0.
// Run it:    PORT=3000 WORKERS=3 node server.js
// Check it:  npx cluster-workshop verify 5 server.js
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;

if (cluster.isPrimary) {
  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) cluster.fork();

  cluster.on('exit', (worker, code, signal) => {
    // TODO: during a shutdown, do not replace the worker; once the last
    // worker has exited, exit the primary with code 0.
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    cluster.fork();
  });

  // TODO: on SIGTERM and on SIGINT (process.on(...)), start the shutdown once:
  // call worker.disconnect() on every worker (it stops taking connections,
  // finishes its requests, then exits) and kill a worker that has not exited
  // after 10 s (a timer with .unref()).
} else {
  // TODO: Ctrl-C sends SIGINT to the workers too, and by default it kills
  // them at once. Let the primary decide when a worker stops.

  const app = express();

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/slow', (req, res) => {
    // A timer, not a busy loop: a request that waits (a database, another service).
    const ms = Math.min(Number(req.query.ms) || 1000, 60_000);
    setTimeout(() => res.json({ pid: process.pid, ms }), ms);
  });

  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });
}
