// The rolling-restart lesson (rolling-restart): on SIGUSR2, replace every worker, one at a
// time, without a failed request and without ever running fewer workers.
// This is the graceful-shutdown lesson's program (graceful shutdown), with a retire() helper.
// Run it:    PORT=3000 WORKERS=3 node server.js
// Check it:  {{cli}} verify rolling-restart server.js
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;
const SHUTDOWN_TIMEOUT = Number(process.env.SHUTDOWN_TIMEOUT) || 10_000;

if (cluster.isPrimary) {
  let shuttingDown = false;
  // Live worker processes (cluster.workers drops a worker at 'disconnect',
  // before its process has exited).
  const live = new Set();

  const fork = () => {
    const worker = cluster.fork();
    live.add(worker);
    // TODO: listen for 'error' on every worker you fork (worker.on('error', ...)):
    // disconnecting a worker that has just died emits one, and an 'error'
    // nobody listens for crashes the primary.
    return worker;
  };

  // Stop a worker gracefully: it takes no new connections, finishes the ones
  // it has, and exits; killed if it is still alive 500 ms after SHUTDOWN_TIMEOUT.
  const retire = (worker) => {
    // TODO: tell the worker first (worker.send('shutdown'), when
    // worker.isConnected()): it starts its own SHUTDOWN_TIMEOUT deadline
    // (messages arrive in order, so it gets this before the disconnect).
    worker.disconnect();
    const timer = setTimeout(() => worker.process.kill('SIGKILL'), SHUTDOWN_TIMEOUT + 500).unref();
    worker.process.once('exit', () => clearTimeout(timer));
  };

  // TODO: rollingRestart(): unless a restart is already running (ignore a
  // second SIGUSR2, and say so in a log line), replace the workers one at a
  // time. For each old worker: fork a replacement, wait for its 'listening'
  // event (give up if it exits first), then retire(old). Never disconnect an
  // old worker before its replacement listens.

  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) fork();

  cluster.on('exit', (worker, code, signal) => {
    live.delete(worker);
    if (shuttingDown) {
      if (live.size === 0) process.exit(0);
      return;
    }
    // TODO: a worker that exits because we retired it (worker.exitedAfterDisconnect)
    // has its replacement already: do not fork another one.
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    fork();
  });

  const shutdown = () => {
    if (shuttingDown) return;
    shuttingDown = true;
    if (live.size === 0) process.exit(0);
    for (const worker of live) if (worker.isConnected()) retire(worker);
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  // TODO: on SIGUSR2 (not SIGUSR1: Node keeps that one for the debugger),
  // run rollingRestart().
} else {
  // The primary drives every stop (the graceful-shutdown lesson).
  process.on('SIGINT', () => {});
  // TODO: ignore SIGTERM too (systemd sends it to the whole group), and once
  // the server no longer listens (retired), answer with Connection: close so
  // keep-alive clients leave.

  const app = express();

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/slow', (req, res) => {
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
