// The capstone lesson (capstone): one cluster with everything from the course.
// Run it:    PORT=3000 WORKERS=3 HEARTBEAT_TIMEOUT=1000 POISON_FILE=/tmp/poison node server.js
// Check it:  {{cli}} verify capstone server.js   (add --seed N to replay a run)
// The lesson text lists every contract; each TODO names the lesson it comes from.
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;
const heartbeatTimeout = Number(process.env.HEARTBEAT_TIMEOUT) || 3000;

if (cluster.isPrimary) {
  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) cluster.fork();

  // The respawn lesson: one replacement per death.
  cluster.on('exit', (worker, code, signal) => {
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    cluster.fork();
    // TODO (new): crash-loop protection. Count the deaths that come within
    // 1 s of the fork; after 5 of them within 10 s, log why and stop forking
    // until SIGUSR2 arrives.
    // TODO (the graceful-shutdown lesson): no replacement while shutting down.
  });

  // TODO (the broadcast lesson): keep the latest config; on a worker's 'set-config'
  // message, send it to every worker; fork replacements with it.
  // TODO (the shared-state lesson): hold the counter; answer each worker's request with its id.
  // TODO (the health-check lesson): heartbeats; kill (SIGKILL) a worker silent for longer
  // than heartbeatTimeout, on a timer of the primary's own.
  // TODO (the graceful-shutdown lesson): worker.on('error') on every worker you fork.
  // TODO (the graceful-shutdown lesson): SIGTERM and SIGINT: disconnect every worker, fork nothing,
  // exit 0 once the last one has exited (kill stragglers after 10 s).
  // TODO (the rolling-restart lesson): SIGUSR2: replace the workers one at a time (fork, wait for
  // 'listening', then disconnect the old one); after a crash loop, first fork
  // the missing workers.
} else {
  // TODO (new): if process.env.POISON_FILE names a file that exists, throw
  // before listening (a worker that cannot start).
  // TODO (the graceful-shutdown lesson): ignore SIGINT and SIGTERM in the worker: the primary
  // drains it. Once the server no longer listens, answer Connection: close (keep-alive
  // clients); server.closeAllConnections() at SHUTDOWN_TIMEOUT after the primary says stop.
  // TODO (the health-check lesson): send the primary a heartbeat every heartbeatTimeout / 4 ms.
  const app = express();
  app.use(express.json({ strict: false }));

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

  app.get('/crash', () => {
    setImmediate(() => {
      throw new Error(`worker ${process.pid} crashed on purpose (GET /crash)`);
    });
  });

  // TODO (the graceful-shutdown lesson): GET /slow?ms=N answers { pid } after N ms on a timer.
  // TODO (the broadcast lesson): GET /config and POST /config (400 unless a JSON object).
  // TODO (the shared-state lesson): POST /count and GET /count, through the primary.
  // TODO (the health-check lesson): GET /hang blocks the event loop forever.

  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port} (heartbeat timeout ${heartbeatTimeout} ms)`);
  });
}
