// The shared-state lesson (shared-state): the primary holds the one cluster-wide counter;
// workers ask it over IPC and match each reply to its question by an id.
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;

if (cluster.isPrimary) {
  // The single source of truth: it lives in the one process that outlives
  // every worker, so a worker's death loses nothing.
  let count = 0;

  cluster.on('message', (worker, message) => {
    if (message?.type !== 'count:ask') return;
    // The primary handles one message at a time, so "add one, then read" is
    // atomic: no two increments can see the same value.
    if (message.op === 'add') count += 1;
    // The reply goes to the worker that asked (this message's `worker`) and
    // carries the question's id back: that worker resolves exactly the
    // request that asked, whatever else is waiting. The asker may have died
    // since it asked: skip it then, and take a failed send in the callback,
    // so the primary (and the count) outlive it.
    if (!worker.isConnected()) return;
    worker.send({ type: 'count:reply', id: message.id, count }, (err) => {
      if (err) console.error(`could not answer worker ${worker.process.pid}: ${err.message}`);
    });
  });

  // isConnected() stays true for a moment after a worker died; an 'error'
  // from a send in that moment must not crash the primary.
  cluster.on('fork', (worker) => {
    worker.on('error', (err) => console.error(`worker ${worker.process.pid}: ${err.message}`));
  });

  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) cluster.fork();

  // One death, one replacement (the respawn lesson); the count stays in the primary.
  cluster.on('exit', (worker, code, signal) => {
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    cluster.fork();
  });
} else {
  // Questions still waiting for the primary's reply, by id. Several requests
  // wait at once in a busy worker; the id says which one a reply belongs to.
  const pending = new Map();
  let lastId = 0;

  process.on('message', (message) => {
    if (message?.type !== 'count:reply') return;
    const resolve = pending.get(message.id);
    pending.delete(message.id);
    resolve?.(message.count);
  });

  function askPrimary(op) {
    return new Promise((resolve) => {
      const id = ++lastId;
      pending.set(id, resolve);
      process.send({ type: 'count:ask', op, id });
    });
  }

  const app = express();

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.post('/count', async (req, res) => {
    // The value after *this* increment, as the primary counted it: never a
    // total heard earlier, which another request may have answered already.
    const count = await askPrimary('add');
    res.json({ pid: process.pid, count });
  });

  app.get('/count', async (req, res) => {
    const count = await askPrimary('get');
    res.json({ pid: process.pid, count });
  });

  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });
}
