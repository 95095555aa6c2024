// The sticky-sessions lesson (sticky-sessions): the same client always reaches the same worker.
// Run it:    PORT=3000 WORKERS=3 node server.js
// Try it:    for i in $(seq 5); do curl -s --interface 127.0.0.10 http://127.0.0.1:3000/visits; echo; done
//            (visits should count 1 to 5 on one pid; today the pid changes and the count restarts)
// Check it:  {{cli}} verify sticky-sessions server.js
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;

if (cluster.isPrimary) {
  // TODO: own the port here, in the primary:
  //   net.createServer({ pauseOnConnect: true }, (socket) => { ... }).listen(port)
  // For each connection, take the client's address (socket.remoteAddress,
  // without a leading "::ffff:"), hash it, pick workers[hash % workers.length]
  // among the live, ready workers, and hand the socket over:
  //   worker.send('sticky:connection', socket, (err) => { ... })
  // Keep that list in step with deaths ('exit' or 'disconnect', whichever
  // comes first) and replacements (a new worker joins once it says it is
  // ready, never on 'online'). While no worker is ready, keep the sockets in
  // an array until one is.

  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) cluster.fork();

  cluster.on('exit', (worker, code, signal) => {
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    cluster.fork();
  });
} else {
  // Visits per client address, kept in this worker's memory: only right if
  // the same client always comes back to this worker.
  const visits = new Map();

  const app = express();

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/visits', (req, res) => {
    const address = (req.socket.remoteAddress ?? '').replace(/^::ffff:/, '');
    const n = (visits.get(address) ?? 0) + 1;
    visits.set(address, n);
    res.json({ pid: process.pid, visits: n });
  });

  // TODO: do not listen here (listening workers get connections round robin).
  // Create the server with http.createServer(app), and when the primary sends
  // a socket (process.on('message', (message, socket) => ...)), pass it in with
  // server.emit('connection', socket) and socket.resume(). Then tell the
  // primary this worker is ready: process.send('sticky:ready').
  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });
}
