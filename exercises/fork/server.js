// The fork lesson (fork): the primary forks WORKERS workers that share one port.
// Run it:    PORT=3000 WORKERS=3 node server.js
// Check it:  {{cli}} verify fork server.js
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const port = Number(process.env.PORT) || 3000;

// TODO: read the number of workers from process.env.WORKERS, and use
// os.availableParallelism() when it is not set.

// TODO: in the primary (cluster.isPrimary), fork that many workers and serve
// nothing; run the express app below only in the workers.

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

app.listen(port, (err) => {
  if (err) throw err;
  console.log(`pid ${process.pid} listening on http://localhost:${port}`);
});
