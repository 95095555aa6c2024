// The sticky-sessions lesson (sticky-sessions): the primary owns the port, hashes each client's
// address to a live worker, and hands the connection over, so a client always
// reaches the same worker (and the state that worker keeps for it).
import cluster from 'node:cluster';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import express from 'express';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;

if (cluster.isPrimary) {
  // Workers that said they are ready to take connections, in a stable order
  // (fork order). It follows deaths and replacements: a socket is only ever
  // handed to a live worker.
  let ready = [];
  // Connections that arrived while no worker was ready (at start-up).
  let waiting = [];

  function clientAddress(socket) {
    // The server listens on IPv6 and IPv4 at once, so an IPv4 client shows up
    // as "::ffff:127.0.0.10": one client, one form, whatever the socket says.
    return (socket.remoteAddress ?? '').replace(/^::ffff:/, '');
  }

  function hash(text) {
    // FNV-1a: cheap, and spreads similar addresses (127.0.0.10, .11, ...) well.
    let h = 0x811c9dc5;
    for (let i = 0; i < text.length; i++) {
      h ^= text.charCodeAt(i);
      h = Math.imul(h, 0x01000193);
    }
    return h >>> 0;
  }

  function handOver(socket) {
    if (ready.length === 0) {
      waiting.push(socket);
      return;
    }
    // The address only, never the port: a client's port changes with every
    // connection, its address does not.
    const worker = ready[hash(clientAddress(socket)) % ready.length];
    // A worker can die after it was picked; with a callback, a failed send is
    // an error passed here (that one connection is lost) instead of an
    // 'error' event that would crash the primary.
    worker.send('sticky:connection', socket, (err) => {
      if (err) console.error(`could not hand a connection to worker ${worker.process.pid}: ${err.message}`);
    });
  }

  // pauseOnConnect: the primary must not read a single byte of the request;
  // whatever it read would be lost when the socket moves to the worker.
  const server = net.createServer({ pauseOnConnect: true }, handOver);
  server.listen(port, () => console.log(`primary ${process.pid} listening on port ${port}`));

  cluster.on('message', (worker, message) => {
    if (message !== 'sticky:ready') return;
    ready = [...ready, worker].sort((a, b) => a.id - b.id);
    const queued = waiting;
    waiting = [];
    queued.forEach(handOver);
  });

  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) cluster.fork();

  // A worker leaves the list the moment the primary learns it is gone: 'exit'
  // fires as soon as the dead process is reaped, while 'disconnect' (the
  // channel closing) can come later. A socket sent to a dead worker is not an
  // error: it is simply never answered. Its replacement joins once ready.
  const leave = (worker) => {
    ready = ready.filter((w) => w !== worker);
  };
  cluster.on('disconnect', leave);

  cluster.on('exit', (worker, code, signal) => {
    leave(worker);
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    cluster.fork();
  });
} else {
  // Visits per client address, in this worker's memory: only right because
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

  // An HTTP server that never listens: its connections come from the primary.
  const server = http.createServer(app);
  // headersTimeout and requestTimeout are only enforced by a server that
  // listens; an inactivity timeout applies to injected connections too, so a
  // client that trickles its headers (slowloris) cannot hold one forever.
  server.setTimeout(30_000);

  process.on('message', (message, socket) => {
    if (message !== 'sticky:connection' || !socket) return;
    server.emit('connection', socket);
    // The primary paused the socket (pauseOnConnect): make sure it flows here.
    socket.resume();
  });

  // Only now can this worker take sockets: tell the primary.
  process.send('sticky:ready');
  console.log(`worker ${process.pid} ready`);
}
