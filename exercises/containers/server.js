// The containers lesson (containers): the graceful-shutdown program, run as a
// container runs it: as PID 1, on the CPUs it is given, with the Dockerfile
// beside this file. Your graceful-shutdown server.js is a good start: paste
// it here, or follow the TODOs.
// Run it:    PORT=3000 WORKERS=2 node server.js
// As PID 1:  PORT=3000 WORKERS=2 unshare --user --map-root-user --pid --fork --mount-proc node server.js
// Check it:  {{cli}} verify containers server.js
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

// TODO: a container may use fewer CPUs than its host has (docker run
// --cpuset-cpus, --cpus). Which function counts the CPUs this process may use?
const workerCount = Number(process.env.WORKERS) || os.cpus().length;
const port = Number(process.env.PORT) || 3000;
const SHUTDOWN_TIMEOUT = Number(process.env.SHUTDOWN_TIMEOUT) || 10_000;

if (cluster.isPrimary) {
  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) cluster.fork();
  // TODO: listen for 'error' on every worker you fork (worker.on('error', ...)):
  // disconnecting a worker that has just died emits one, and an 'error'
  // nobody listens for crashes the primary.

  cluster.on('exit', (worker, code, signal) => {
    // TODO: during a shutdown, do not replace the worker; once the last
    // worker has exited, exit the primary with code 0.
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    cluster.fork();
  });

  // TODO: on SIGTERM and on SIGINT (process.on(...)), start the shutdown once:
  // tell every worker (worker.send('shutdown')), call worker.disconnect() on
  // it (it stops taking connections, finishes its requests, then exits), and
  // SIGKILL a worker that has not exited SHUTDOWN_TIMEOUT + 500 ms later (a
  // timer with .unref()).
} else {
  // TODO: Ctrl-C sends SIGINT to the workers too, systemd sends SIGTERM to
  // them too, and by default either kills them at once. Let the primary
  // decide when a worker stops.

  const app = express();

  // TODO: keep-alive clients never leave on their own. Once the server no
  // longer listens (!server.listening), answer with Connection: close.

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/slow', (req, res) => {
    // A timer, not a busy loop: a request that waits (a database, another service).
    const ms = Math.min(Number(req.query.ms) || 1000, 60_000);
    setTimeout(() => res.json({ pid: process.pid, ms }), ms);
  });

  const server = app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });

  // TODO: when the primary says 'shutdown', start the worker's own deadline:
  // server.closeAllConnections() SHUTDOWN_TIMEOUT later (a timer with .unref()).
}
