// The process-manager lesson (process-manager): the same server as the
// graceful-shutdown lesson's workers, with no forking of its own. PM2 is the
// primary (ecosystem.config.cjs beside this file): it forks the instances,
// replaces the ones that die, reloads them one for one, and stops them with
// SIGINT. What PM2 cannot know stays here: when this instance is ready, and
// how to finish its requests when it is asked to stop.
import cluster from 'node:cluster';
import { existsSync } from 'node:fs';
import { setTimeout as sleep } from 'node:timers/promises';
import express from 'express';

const port = Number(process.env.PORT) || 3000;
const STARTUP_MS = Number(process.env.STARTUP_MS) || 0;

// A start-up that cannot succeed (a missing configuration, a database that is
// down) ends the instance with code 1 at once: PM2 sees the exit and restarts
// it after exp_backoff_restart_delay. Exit explicitly: under PM2, an error
// thrown at the top level of an ES module becomes an unhandled rejection that
// PM2 logs without ending the instance, which would stay up and never listen.
if (process.env.CRASH_FILE && existsSync(process.env.CRASH_FILE)) {
  console.error(`${process.env.CRASH_FILE} exists: refusing to start (instance ${process.pid})`);
  process.exit(1);
}

// Memory that /grow keeps: referenced from the module, so the garbage
// collector cannot give it back, as a leak does.
const grown = [];

const app = express();

// Once the server no longer listens (SIGINT came), every answer says
// Connection: close: a keep-alive client reads it and opens its next request
// on a new connection, which goes to an instance that still listens. Without
// it, a client that sends back to back keeps this instance busy until PM2's
// kill_timeout, and its SIGKILL cuts the client.
app.use((req, res, next) => {
  if (!server.listening) res.setHeader('Connection', 'close');
  next();
});

app.get('/', (req, res) => {
  res.json({ pid: process.pid, readyAt });
});

app.get('/slow', (req, res) => {
  // A timer, not a busy loop: a request that waits (a database, another
  // service), the kind that is in flight when PM2 stops the instance.
  const ms = Math.min(Number(req.query.ms) || 1000, 60_000);
  setTimeout(() => res.json({ pid: process.pid, readyAt, ms }), ms);
});

app.post('/grow', (req, res) => {
  const mb = Math.min(Number(req.query.mb) || 10, 500);
  // Filled, not just allocated: untouched pages would not count in the RSS
  // that PM2's max_memory_restart reads.
  grown.push(Buffer.alloc(mb * 1024 * 1024, 1));
  res.json({ pid: process.pid, readyAt, rss: process.memoryUsage().rss });
});

// The start-up work (a cache to load) comes BEFORE listen(): in cluster mode
// the primary (PM2) hands connections to every instance that listens, whatever
// wait_ready says, so an instance that listened first would get requests it
// cannot serve yet.
await sleep(STARTUP_MS);
const readyAt = Date.now();

const server = app.listen(port, (err) => {
  if (err) throw err;
  console.log(`instance ${process.pid} ready on http://localhost:${port} after ${STARTUP_MS} ms of start-up`);
  // Only now: with wait_ready, PM2 stops the old instance of a reload when it
  // gets this message. process.send exists only under a primary (PM2); plain
  // `node server.js` has no one to tell.
  process.send?.('ready');
});

// PM2 stops an instance with SIGINT (pm2 stop, pm2 reload, a memory restart),
// then SIGKILL after kill_timeout. Stop taking connections, let the requests
// in flight finish and the keep-alive clients leave, then exit 0.
//
// Under PM2 the one piece of cluster code this file keeps: leave through
// cluster.worker.disconnect(), not server.close() and process.exit(). PM2
// signals the instance instead of disconnecting it (as lesson
// rolling-restart's primary did), and until PM2 has read that this server
// closed, it may still hand it connections. disconnect() closes the server,
// waits for PM2's acknowledgement (connections handed over meanwhile go back
// to PM2, which gives them to another instance), closes the channel, and the
// process exits by itself once its last connection has ended. An instance that
// exits on its own right after server.close() takes those connections with it:
// their clients wait until they time out.
process.on('SIGINT', () => {
  if (!server.listening) return; // a second SIGINT changes nothing: the drain is under way
  console.log(`instance ${process.pid} got SIGINT: draining`);
  if (cluster.worker) cluster.worker.disconnect();
  else server.close(() => process.exit(0)); // plain `node server.js`: no primary to tell
  // Idle keep-alive connections would hold the close open until they time out.
  server.closeIdleConnections();
});
