// The health-check lesson (health-check): the primary replaces workers that hang.
// Run it:    PORT=3000 WORKERS=3 HEARTBEAT_TIMEOUT=1000 node server.js
// Check it:  {{cli}} verify health-check server.js
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;
const heartbeatTimeout = Number(process.env.HEARTBEAT_TIMEOUT) || 3000;

if (cluster.isPrimary) {
  console.log(`primary ${process.pid} forking ${workerCount} workers (heartbeat timeout ${heartbeatTimeout} ms)`);
  for (let i = 0; i < workerCount; i++) cluster.fork();

  // TODO: remember when each worker last sent a heartbeat (a Map from
  // worker.id to Date.now(), updated in worker.on('message', ...)).

  // TODO: on a timer of the primary's own (setInterval), kill with SIGKILL
  // every worker that has been silent for longer than heartbeatTimeout.
  // Never check only when a message arrives: a hung worker sends none.

  cluster.on('exit', (worker, code, signal) => {
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    cluster.fork();
  });
} else {
  const app = express();

  // TODO: send the primary a heartbeat several times per heartbeatTimeout
  // (setInterval + process.send({ type: 'heartbeat', ... })), with the
  // worker's memory (process.memoryUsage().rss) and how late the timer fired.

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/heavy', (req, res) => {
    const ms = Math.min(Number(req.query.ms) || 100, 10_000);
    const end = Date.now() + ms;
    while (Date.now() < end) {
      // burn
    }
    res.json({ pid: process.pid, ms });
  });

  app.get('/hang', () => {
    // The event loop never turns again: no answer, no timer, no message.
    // The process stays alive, so 'exit' never fires for it.
    for (;;) {
      // hang
    }
  });

  app.get('/crash', () => {
    setImmediate(() => {
      throw new Error(`worker ${process.pid} crashed on purpose (GET /crash)`);
    });
  });

  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });
}
