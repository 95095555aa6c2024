// The shared-state lesson (shared-state): one cluster-wide counter, held by the primary.
// Run it:    PORT=3000 WORKERS=3 node server.js
// Try it:    for i in $(seq 6); do curl -s -X POST http://127.0.0.1:3000/count; echo; done
// Check it:  {{cli}} verify shared-state server.js
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;

if (cluster.isPrimary) {
  // TODO: keep the cluster-wide count here, in the primary (let count = 0).
  // Listen for questions from workers (cluster.on('message', (worker, message) => ...)):
  // for an "add", add one; for both "add" and "get", reply to that worker
  // with worker.send({ ..., id: message.id, count }, callback), echoing the
  // question's id; skip a worker that is no longer connected (it may have
  // died since it asked), and listen for 'error' on every worker.

  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) cluster.fork();

  cluster.on('exit', (worker, code, signal) => {
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    cluster.fork();
  });
} else {
  // The bug this lesson starts from: this counter lives in one worker's
  // memory, so every worker counts on its own.
  // TODO: remove it. Instead, ask the primary: give each question an id,
  // process.send({ type, op, id }), keep a Map from id to the promise's
  // resolve, and in process.on('message', ...) resolve the one whose id came back.
  let count = 0;

  const app = express();

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.post('/count', (req, res) => {
    // TODO: ask the primary to add one and answer the count it replies.
    count += 1;
    res.json({ pid: process.pid, count });
  });

  app.get('/count', (req, res) => {
    // TODO: ask the primary for the count.
    res.json({ pid: process.pid, count });
  });

  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });
}
