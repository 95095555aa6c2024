// The health-check lesson (health-check): the primary hears a heartbeat from every worker
// and replaces the ones that go silent (hung) or grow too big (leaking).
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;
const heartbeatTimeout = Number(process.env.HEARTBEAT_TIMEOUT) || 3000;
// Several beats fit in one timeout, so one late beat (a busy worker, a loaded
// machine) is never mistaken for a dead one.
const heartbeatInterval = Math.max(50, Math.floor(heartbeatTimeout / 4));
const memoryLimitMb = Number(process.env.MEMORY_LIMIT_MB) || 512;

if (cluster.isPrimary) {
  console.log(`primary ${process.pid} forking ${workerCount} workers (heartbeat timeout ${heartbeatTimeout} ms)`);
  const lastBeat = new Map(); // worker.id -> Date.now() of its last heartbeat

  // A worker that hangs before it listens (a start-up stuck in a synchronous
  // call) never sends a first beat: its clock starts at fork, with this much
  // allowance for loading its code.
  const STARTUP_ALLOWANCE_MS = 10_000;

  const fork = () => {
    const worker = cluster.fork();
    // Messaging or disconnecting a worker that has just died (killed by the
    // check) emits 'error' on it: without a listener it crashes the primary.
    worker.on('error', (err) => console.log(`worker ${worker.process.pid}: ${err.message}`));
    // The clock starts at fork, in the future by the start-up allowance, and
    // from 'listening' on the heartbeats keep it current.
    lastBeat.set(worker.id, Date.now() + STARTUP_ALLOWANCE_MS);
    worker.on('listening', () => lastBeat.set(worker.id, Date.now()));
    worker.on('message', (msg) => {
      if (msg?.type !== 'heartbeat') return;
      lastBeat.set(worker.id, Date.now());
      if (msg.rssMb > memoryLimitMb && !worker.retiring) {
        // Too big, but still serving: start a replacement first, and only
        // once it listens let the old one finish its requests (disconnect),
        // so capacity never dips (the rolling-restart lesson).
        console.log(`worker ${worker.process.pid} uses ${msg.rssMb} MB > ${memoryLimitMb} MB; replacing it`);
        worker.retiring = true;
        fork().once('listening', () => {
          if (!worker.isConnected()) return;
          worker.disconnect();
          setTimeout(() => worker.process.kill('SIGKILL'), 10_000).unref();
        });
      }
    });
    return worker;
  };
  for (let i = 0; i < workerCount; i++) fork();

  // The check runs on its own timer: a hung worker sends nothing, so a check
  // made only when a message arrives would never run for it.
  setInterval(() => {
    const now = Date.now();
    for (const [id, at] of lastBeat) {
      const worker = cluster.workers[id];
      if (!worker) {
        lastBeat.delete(id);
      } else if (now - at > heartbeatTimeout) {
        console.log(`worker ${worker.process.pid} silent for ${now - at} ms; killing it`);
        lastBeat.delete(id); // one kill per hang
        // SIGKILL: a hung event loop runs no handler at all, and a worker
        // that ignores SIGTERM (the graceful-shutdown lesson) survives it.
        worker.process.kill('SIGKILL');
      }
    }
  }, Math.max(25, Math.floor(heartbeatInterval / 2)));

  // 'exit' still replaces every death, including the ones the check causes.
  cluster.on('exit', (worker, code, signal) => {
    lastBeat.delete(worker.id);
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`})`);
    // A worker retired for its memory already has its replacement.
    if (!worker.retiring) fork();
  });
} else {
  const app = express();

  // The heartbeat: a timer on the worker's own event loop, so it stops
  // exactly when the event loop stops. Lag (how late the timer fired) and
  // memory tell the primary how healthy the worker is.
  let expected = Date.now() + heartbeatInterval;
  const beat = setInterval(() => {
    const now = Date.now();
    const lagMs = Math.max(0, now - expected);
    expected = now + heartbeatInterval;
    if (process.connected) {
      process.send({ type: 'heartbeat', rssMb: Math.round(process.memoryUsage().rss / 1e6), lagMs });
    }
  }, heartbeatInterval);
  beat.unref(); // the heartbeat alone must not keep a drained worker alive

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/heavy', (req, res) => {
    const ms = Math.min(Number(req.query.ms) || 100, 10_000);
    const end = Date.now() + ms;
    while (Date.now() < end) {
      // burn: busy for ms, then the heartbeat catches up
    }
    res.json({ pid: process.pid, ms });
  });

  app.get('/hang', () => {
    // Alive (the process exists, 'exit' never fires) and useless: the event
    // loop never turns again, so no request and no heartbeat gets through.
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
