// Blind-authored (written from the lesson text alone), author's note:
// The primary forks WORKERS workers correctly; each worker requires express and
// defines / and /heavy, then does `module.exports = app` (as if something else
// would start it) and never calls app.listen(). Workers stay alive (IPC), no socket.
// expect: fail at starts
// expect-text: listens on no port
// ready-timeout: 4000
const cluster = require('node:cluster');
const os = require('node:os');
const express = require('express');

if (cluster.isPrimary) {
  const workers = Number(process.env.WORKERS) || os.availableParallelism();
  for (let i = 0; i < workers; i++) cluster.fork();
  cluster.on('online', (w) => console.log(`worker ${w.process.pid} online`));
} else {
  const app = express();

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/heavy', (req, res) => {
    const ms = Number(req.query.ms) || 0;
    const end = Date.now() + ms;
    while (Date.now() < end) {}
    res.json({ pid: process.pid, ms });
  });

  console.log(`worker ${process.pid} ready`);
  module.exports = app;
}
