// The containers lesson (containers): the graceful-shutdown program as a
// container runs it. As PID 1 (docker run), SIGTERM does nothing unless the
// program handles it; the default worker count follows the CPUs the
// container may use (os.availableParallelism()); see the Dockerfile beside it.
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

// os.availableParallelism(), not os.cpus().length: a container is given fewer
// CPUs than its host has (--cpuset-cpus, --cpus, a Kubernetes CPU limit), and
// os.cpus() lists the host's. Workers beyond the CPUs we may use only compete.
const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;
// The time limit of a shutdown. At the limit the worker ends its remaining
// connections itself; the primary's SIGKILL, a moment later, is for a worker
// that can no longer run code (a hung event loop).
const SHUTDOWN_TIMEOUT = Number(process.env.SHUTDOWN_TIMEOUT) || 10_000;
const KILL_GRACE_MS = 500;

if (cluster.isPrimary) {
  let shuttingDown = false;
  // Our own count of live worker processes: cluster.workers drops a worker
  // at 'disconnect', which comes before its process has exited.
  const live = new Set();

  const fork = () => {
    const worker = cluster.fork();
    live.add(worker);
    // Sending to (or disconnecting) a worker that has just died emits
    // 'error' (EPIPE) on it; without a listener that crashes the primary.
    worker.on('error', (err) => console.error(`worker ${worker.process.pid}: ${err.message}`));
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
      if (worker.isConnected()) {
        // Tell the worker its deadline starts now (messages arrive in order,
        // so before the disconnect), then disconnect(): the worker closes its
        // server (no new connections), finishes the requests it has, and
        // exits when nothing is left.
        worker.send('shutdown');
        worker.disconnect();
      }
      // A worker that is still alive after the limit (and its own
      // closeAllConnections) is killed. unref: this timer alone must not keep
      // the primary alive.
      const timer = setTimeout(() => {
        console.log(`worker ${worker.process.pid} did not finish within ${SHUTDOWN_TIMEOUT} ms; killing it`);
        worker.process.kill('SIGKILL');
      }, SHUTDOWN_TIMEOUT + KILL_GRACE_MS).unref();
      worker.process.once('exit', () => clearTimeout(timer));
    }
  };
  // As PID 1 of a container the kernel drops any signal PID 1 has no handler
  // for: without this line docker stop does nothing for 10 s, then SIGKILLs
  // (exit code 137), cutting every request in flight.
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
} else {
  // Ctrl-C sends SIGINT to every process of the group, and systemd (or
  // kill -TERM -<pgid>) sends SIGTERM to every process of the group. By
  // default either kills a worker on the spot, in-flight requests and all.
  // The primary drives the shutdown, so the worker ignores both.
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});

  const app = express();

  // Once the server no longer listens (the primary called disconnect()),
  // every answer says Connection: close: a keep-alive client reads it, then
  // opens its next request on a new connection, which goes to a worker that
  // still listens. Without it, Node answers keep-alive and a busy client
  // keeps this worker alive until the time limit.
  app.use((req, res, next) => {
    if (!server.listening) res.setHeader('Connection', 'close');
    next();
  });

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/slow', (req, res) => {
    // A timer, not a busy loop: a slow request that waits (a database, another
    // service), the kind that is in flight when a shutdown comes.
    const ms = Math.min(Number(req.query.ms) || 1000, 60_000);
    setTimeout(() => res.json({ pid: process.pid, ms }), ms);
  });

  const server = app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });

  // The worker's own deadline: at the limit, end every connection that is
  // left (cutting what never finished) so the worker can exit by itself.
  process.on('message', (message) => {
    if (message !== 'shutdown') return;
    setTimeout(() => server.closeAllConnections(), SHUTDOWN_TIMEOUT).unref();
  });
}
