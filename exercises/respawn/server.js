// The respawn lesson (respawn): the primary replaces every worker that dies.
// Run it:    PORT=3000 WORKERS=3 node server.js
// Check it:  {{cli}} verify respawn server.js
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;

if (cluster.isPrimary) {
  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) cluster.fork();

  // TODO: when a worker exits (cluster.on('exit', ...)), fork exactly one
  // replacement, and log which worker died and why (code or signal).
} else {
  const app = express();

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/heavy', (req, res) => {
    const ms = Math.min(Number(req.query.ms) || 100, 10_000);
    const end = Date.now() + ms;
    while (Date.now() < end) {
      // burn
    }
    res.json({ pid: process.pid, ms });
  });

  // TODO: add GET /crash: the worker that receives it dies of an uncaught
  // exception and sends no answer. (A throw inside an express handler becomes
  // a 500 answer instead: throw from a setImmediate callback.)

  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });
}
