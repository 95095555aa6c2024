// The broadcast lesson (broadcast): a config posted to any worker becomes the config of
// every worker, through the primary.
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;

if (cluster.isPrimary) {
  // The primary holds the one true copy: workers come and go, the primary stays.
  let config = {};

  // A worker forked now starts with the latest config, passed in its environment.
  const forkWorker = () => cluster.fork({ CONFIG: JSON.stringify(config) });

  // isConnected() only says whether the primary has noticed the channel
  // closing: it stays true for a moment after a worker died. An 'error' from a
  // send (or a disconnect) in that moment goes here instead of crashing the
  // primary.
  cluster.on('fork', (worker) => {
    worker.on('error', (err) => console.error(`worker ${worker.process.pid}: ${err.message}`));
  });

  const sendConfig = (worker) => {
    // A worker known to be gone gets nothing; one that died a moment ago is
    // caught by the callback (and the 'error' listener above).
    if (!worker.isConnected()) return;
    worker.send({ type: 'config', config }, (err) => {
      if (err) console.error(`could not send the config to worker ${worker.process.pid}: ${err.message}`);
    });
  };

  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) forkWorker();

  cluster.on('message', (worker, message) => {
    if (message?.type !== 'set-config') return;
    config = message.config;
    for (const w of Object.values(cluster.workers)) sendConfig(w);
  });

  // An update that arrived while a new worker was still loading its modules
  // was sent before its process.on('message') existed, and messages nobody
  // listens to are dropped. Once it listens, its listener exists: send again.
  cluster.on('listening', (worker) => sendConfig(worker));

  cluster.on('exit', (worker, code, signal) => {
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    forkWorker();
  });
} else {
  let config = JSON.parse(process.env.CONFIG || '{}');

  // Installed before listen(), so no config sent after 'listening' is missed.
  process.on('message', (message) => {
    if (message?.type === 'config') config = message.config;
  });

  const app = express();

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/config', (req, res) => {
    res.json({ pid: process.pid, config });
  });

  app.post('/config', express.json(), (req, res) => {
    const body = req.body;
    // Arrays and null are JSON too, but not a config: only a plain object is.
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      return res.status(400).json({ pid: process.pid, error: 'the body must be a JSON object' });
    }
    // Set it here too, so this worker answers with it at once; the primary's
    // broadcast brings it to every other worker (and again to this one).
    config = body;
    process.send({ type: 'set-config', config: body });
    res.json({ pid: process.pid, config: body });
  });

  // express.json() rejects a body that is not JSON with a 400 error; answer
  // it as JSON with our pid, like every other response.
  app.use((err, req, res, next) => {
    res.status(err.status ?? 500).json({ pid: process.pid, error: err.message });
  });

  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });
}
