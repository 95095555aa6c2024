// The broadcast lesson (broadcast): a config posted to any worker becomes the config of
// every worker, through the primary.
// Run it:    PORT=3000 WORKERS=3 node server.js
// Check it:  {{cli}} verify broadcast server.js
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;

if (cluster.isPrimary) {
  // TODO: keep the latest config here (it starts as {}).

  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) cluster.fork();

  // TODO: when a worker sends a new config (cluster.on('message', ...)),
  // remember it and send it to every worker in cluster.workers. Check
  // worker.isConnected() first, pass a callback to worker.send, and listen for
  // 'error' on every worker, so a worker that just died cannot crash the
  // primary.

  // TODO: a worker forked later must start with the latest config, for
  // example cluster.fork({ CONFIG: JSON.stringify(config) }) here and below.

  cluster.on('exit', (worker, code, signal) => {
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    cluster.fork();
  });
} else {
  const config = {};

  // TODO: take the config this worker starts with, and replace it whenever
  // the primary sends a new one (process.on('message', ...)).

  const app = express();

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/config', (req, res) => {
    res.json({ pid: process.pid, config });
  });

  // TODO: POST /config with a JSON object body: send it to the primary
  // (process.send) and answer { pid, config }. Anything that is not a JSON
  // object (broken JSON, an array, a string, null) gets status 400 with
  // { pid, error } and changes nothing.

  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });
}
