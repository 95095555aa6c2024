// The rolling-restart lesson (rolling-restart): on SIGUSR2, replace every worker, one at a
// time, without a failed request and without ever running fewer workers.
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;
// The time limit of a drain: at the limit the worker ends its remaining
// connections itself; the primary's SIGKILL, a moment later, is for a worker
// that can no longer run code.
const SHUTDOWN_TIMEOUT = Number(process.env.SHUTDOWN_TIMEOUT) || 10_000;
const KILL_GRACE_MS = 500;

if (cluster.isPrimary) {
  let shuttingDown = false;
  let restarting = false;
  // Live worker processes (cluster.workers drops a worker at 'disconnect',
  // before its process has exited).
  const live = new Set();

  const fork = () => {
    const worker = cluster.fork();
    live.add(worker);
    // Messaging or disconnecting a worker that has just died emits 'error'
    // (EPIPE); without a listener that crashes the primary.
    worker.on('error', (err) => console.error(`worker ${worker.process.pid}: ${err.message}`));
    return worker;
  };

  // Stop a worker gracefully: it takes no new connections, finishes the ones
  // it has, sends its keep-alive clients away, and exits; killed if it has
  // not exited within the limit.
  const retire = (worker) => {
    if (worker.isConnected()) {
      worker.send('shutdown'); // starts the worker's own deadline (messages arrive in order)
      worker.disconnect();
    }
    const timer = setTimeout(() => worker.process.kill('SIGKILL'), SHUTDOWN_TIMEOUT + KILL_GRACE_MS).unref();
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
      // Replacement first: capacity goes N -> N+1 -> N, never N-1. And
      // 'listening', not 'online': 'online' comes as soon as the process
      // runs, before it has loaded this code and listened.
      const fresh = fork();
      fresh.replacing = true; // a death before it listens is a bad deploy, not a crash to repair
      const ok = await listening(fresh);
      fresh.replacing = false;
      if (!ok) {
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
    // A replacement that died before it listened (new code that cannot
    // start): forking it again would die again, in a loop. The restart
    // stops there and the old workers keep serving.
    if (worker.replacing) return;
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    fork();
  });

  const shutdown = () => {
    if (shuttingDown) return;
    shuttingDown = true;
    if (live.size === 0) process.exit(0);
    for (const worker of live) retire(worker);
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  // SIGUSR2, not SIGUSR1: Node reserves SIGUSR1 to start the inspector (debugger).
  process.on('SIGUSR2', rollingRestart);
} else {
  // The primary drives every stop (the graceful-shutdown lesson): a signal to
  // the whole group (Ctrl-C, systemd) must not kill the worker.
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});

  const app = express();

  // Once the server no longer listens (retired), every answer says
  // Connection: close, so keep-alive clients reconnect to a worker that
  // still listens instead of keeping this one alive.
  app.use((req, res, next) => {
    if (!server.listening) res.setHeader('Connection', 'close');
    next();
  });

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

  // The worker's own deadline: at the limit, end what is left.
  process.on('message', (message) => {
    if (message === 'shutdown') setTimeout(() => server.closeAllConnections(), SHUTDOWN_TIMEOUT).unref();
  });
}
