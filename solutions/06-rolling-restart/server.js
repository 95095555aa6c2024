// Lesson 6 (rolling-restart): on SIGUSR2, replace every worker, one at a
// time, without a failed request and without ever running fewer workers.
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;
const DRAIN_LIMIT_MS = 10_000;

if (cluster.isPrimary) {
  let shuttingDown = false;
  let restarting = false;
  // Live worker processes (cluster.workers drops a worker at 'disconnect',
  // before its process has exited).
  const live = new Set();

  const fork = () => {
    const worker = cluster.fork();
    live.add(worker);
    return worker;
  };

  // Stop a worker gracefully: it takes no new connections, finishes the ones
  // it has, and exits; killed if it has not exited within the limit.
  const retire = (worker) => {
    worker.disconnect();
    const timer = setTimeout(() => worker.process.kill('SIGKILL'), DRAIN_LIMIT_MS).unref();
    worker.process.once('exit', () => clearTimeout(timer));
  };

  // Resolves true once the worker listens, false if it dies first (a new
  // version that crashes at start-up must not take the old ones down).
  const listening = (worker) =>
    new Promise((resolve) => {
      worker.once('listening', () => resolve(true));
      worker.once('exit', () => resolve(false));
    });

  const rollingRestart = async () => {
    // One restart at a time: a second SIGUSR2 during a restart is ignored.
    // The restart under way already replaces every worker it found.
    if (restarting || shuttingDown) {
      console.log('SIGUSR2 ignored: a restart (or shutdown) is already under way');
      return;
    }
    restarting = true;
    // A worker retired by the last restart may still be finishing a long
    // request: it already has its replacement, so leave it out.
    const old = [...live].filter((worker) => !worker.exitedAfterDisconnect);
    console.log(`rolling restart of ${old.length} workers`);
    for (const worker of old) {
      if (shuttingDown) break;
      // Replacement first: capacity goes N -> N+1 -> N, never N-1.
      const fresh = fork();
      if (!(await listening(fresh))) {
        console.error('a replacement died before it listened; restart stopped, the old workers keep serving');
        break;
      }
      retire(worker);
    }
    restarting = false;
    console.log('rolling restart done');
  };

  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) fork();

  cluster.on('exit', (worker, code, signal) => {
    live.delete(worker);
    if (shuttingDown) {
      if (live.size === 0) process.exit(0);
      return;
    }
    // A worker we retired (disconnect) has been replaced already.
    if (worker.exitedAfterDisconnect) return;
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
  // SIGUSR2, not SIGUSR1: Node reserves SIGUSR1 to start the inspector (debugger).
  process.on('SIGUSR2', rollingRestart);
} else {
  // The primary drives every stop (lesson 5).
  process.on('SIGINT', () => {});

  const app = express();

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/slow', (req, res) => {
    const ms = Math.min(Number(req.query.ms) || 1000, 60_000);
    setTimeout(() => res.json({ pid: process.pid, ms }), ms);
  });

  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });
}
