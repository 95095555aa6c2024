// The respawn lesson (respawn): the primary replaces every worker that dies.
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;

if (cluster.isPrimary) {
  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) cluster.fork();

  // 'exit' fires once per worker, whatever killed it: one death, one replacement.
  cluster.on('exit', (worker, code, signal) => {
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    cluster.fork();
  });
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

  app.get('/crash', () => {
    // Thrown outside express's own try/catch (which would turn it into a 500),
    // so it is a real uncaught exception that ends the worker.
    setImmediate(() => {
      throw new Error(`worker ${process.pid} crashed on purpose (GET /crash)`);
    });
  });

  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });
}
