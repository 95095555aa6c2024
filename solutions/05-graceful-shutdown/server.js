// Lesson 5 (graceful-shutdown): on SIGTERM or Ctrl-C, stop taking new
// connections, finish the requests in flight, then exit 0.
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;
const SHUTDOWN_LIMIT_MS = 10_000;

if (cluster.isPrimary) {
  let shuttingDown = false;
  // Our own count of live worker processes: cluster.workers drops a worker
  // at 'disconnect', which comes before its process has exited.
  const live = new Set();

  const fork = () => {
    const worker = cluster.fork();
    live.add(worker);
    return worker;
  };

  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) fork();

  cluster.on('exit', (worker, code, signal) => {
    live.delete(worker);
    if (shuttingDown) {
      // Exit only once the last worker is gone: a supervisor (systemd,
      // Docker, Kubernetes) treats the primary's exit as "stopped" and
      // kills whatever is left in the group.
      if (live.size === 0) {
        console.log('all workers finished; primary exiting');
        process.exit(0);
      }
      return; // a worker that we are stopping is not replaced
    }
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    fork();
  });

  const shutdown = (signal) => {
    if (shuttingDown) return; // a second Ctrl-C changes nothing: the drain is under way
    shuttingDown = true;
    console.log(`primary got ${signal}: draining ${live.size} workers`);
    if (live.size === 0) process.exit(0);
    for (const worker of live) {
      // disconnect(): the worker closes its server (no new connections),
      // finishes the requests it has, and exits when nothing is left.
      worker.disconnect();
      // A worker stuck on a request that never ends is killed after the limit.
      // unref: this timer alone must not keep the primary alive.
      const timer = setTimeout(() => {
        console.log(`worker ${worker.process.pid} did not finish within ${SHUTDOWN_LIMIT_MS} ms; killing it`);
        worker.process.kill('SIGKILL');
      }, SHUTDOWN_LIMIT_MS).unref();
      worker.process.once('exit', () => clearTimeout(timer));
    }
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
} else {
  // Ctrl-C sends SIGINT to every process of the group, workers included. By
  // default that kills a worker on the spot, in-flight requests and all. The
  // primary drives the shutdown, so the worker ignores the signal.
  process.on('SIGINT', () => {});

  const app = express();

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/slow', (req, res) => {
    // A timer, not a busy loop: a slow request that waits (a database, another
    // service), the kind that is in flight when a shutdown comes.
    const ms = Math.min(Number(req.query.ms) || 1000, 60_000);
    setTimeout(() => res.json({ pid: process.pid, ms }), ms);
  });

  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });
}
