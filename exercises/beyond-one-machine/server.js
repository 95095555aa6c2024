// The beyond-one-machine lesson: one "machine" behind nginx. The cluster of
// the earlier lessons (respawn, graceful shutdown with drain, rolling restart
// on SIGUSR2) is here already; make it a machine that can stand beside
// another one behind a load balancer (the TODOs), and fill in nginx.conf.
// Needs nginx and Redis (redis-server). Run it by hand: see the lesson text
// ({{cli}} print beyond-one-machine), in short:
//   export PORT=3000 WORKERS=2 SHUTDOWN_TIMEOUT=5000 TRUSTED_PROXY=127.0.0.1 REDIS_PREFIX=dev:
//   HOST=127.0.0.2 node server.js   and   HOST=127.0.0.3 node server.js
//   nginx -p /tmp/lb/ -c nginx.conf -e error.log -g 'daemon off;'   (nginx.conf filled in first)
// Check it:  {{cli}} verify beyond-one-machine server.js
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';
import session from 'express-session';
import { RedisStore } from 'connect-redis';
import { Redis } from 'ioredis';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;
// The address this machine listens on; both machines use the same PORT.
const host = process.env.HOST || '127.0.0.1';
const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
const prefix = process.env.REDIS_PREFIX ?? 'cluster-workshop:';
// The proxy's address: only a connection from it may say who the client was.
const trustedProxy = process.env.TRUSTED_PROXY || '127.0.0.1';
// The time limit of a drain: at the limit the worker ends its remaining
// connections itself; the primary's SIGKILL, a moment later, is for a worker
// that can no longer run code.
const SHUTDOWN_TIMEOUT = Number(process.env.SHUTDOWN_TIMEOUT) || 10_000;
const KILL_GRACE_MS = 500;

if (cluster.isPrimary) {
  let shuttingDown = false;
  let restarting = false;
  // Live worker processes (cluster.workers drops a worker at 'disconnect',
  // before its process has exited).
  const live = new Set();

  const fork = () => {
    const worker = cluster.fork();
    live.add(worker);
    // Messaging or disconnecting a worker that has just died emits 'error'
    // (EPIPE); without a listener that crashes the primary.
    worker.on('error', (err) => console.error(`worker ${worker.process.pid}: ${err.message}`));
    return worker;
  };

  // Stop a worker gracefully: no new connections, finish the ones it has,
  // send its keep-alive clients (nginx) away, exit; killed at the limit.
  const retire = (worker) => {
    if (worker.isConnected()) {
      worker.send('shutdown'); // starts the worker's own deadline (messages arrive in order)
      worker.disconnect();
    }
    const timer = setTimeout(() => worker.process.kill('SIGKILL'), SHUTDOWN_TIMEOUT + KILL_GRACE_MS).unref();
    worker.process.once('exit', () => clearTimeout(timer));
  };

  // Resolves true once the worker listens, false if it dies first.
  const listening = (worker) =>
    new Promise((resolve) => {
      worker.once('listening', () => resolve(true));
      worker.once('exit', () => resolve(false));
    });

  // Rolling restart (lesson rolling-restart): replacement first, then retire
  // the old worker, one at a time: capacity never drops.
  const rollingRestart = async () => {
    if (restarting || shuttingDown) return;
    restarting = true;
    const old = [...live].filter((worker) => !worker.exitedAfterDisconnect);
    console.log(`${host}: rolling restart of ${old.length} workers`);
    for (const worker of old) {
      if (shuttingDown) break;
      const fresh = fork();
      fresh.replacing = true;
      const ok = await listening(fresh);
      fresh.replacing = false;
      if (!ok) {
        console.error(`${host}: a replacement died before it listened; restart stopped`);
        break;
      }
      retire(worker);
    }
    restarting = false;
    console.log(`${host}: rolling restart done`);
  };

  console.log(`${host}: primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) fork();

  cluster.on('exit', (worker, code, signal) => {
    live.delete(worker);
    if (shuttingDown) {
      // Exit 0 once the last worker is gone, and not before: the machine
      // leaves only when its requests are done.
      if (live.size === 0) process.exit(0);
      return;
    }
    if (worker.exitedAfterDisconnect || worker.replacing) return;
    console.log(`${host}: worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    fork();
  });

  // SIGTERM to the primary or to the whole group (systemd, docker stop,
  // Kubernetes): drain every worker, fork nothing more.
  const shutdown = () => {
    if (shuttingDown) return;
    shuttingDown = true;
    console.log(`${host}: stopping`);
    if (live.size === 0) process.exit(0);
    for (const worker of live) retire(worker);
  };
  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  process.on('SIGUSR2', rollingRestart);
} else {
  // The primary drives every stop: a signal to the whole group must not kill
  // a worker in the middle of its requests.
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});

  // One Redis connection per worker; closed at disconnect, or the drained
  // worker would never end.
  const redis = new Redis(redisUrl);
  redis.on('error', (err) => console.error(`redis: ${err.message}`));
  cluster.worker.on('disconnect', () => redis.quit().catch(() => {}));
  // (redis is unused until the sessions move there: see the TODO below.)

  const app = express();
  // TODO: behind nginx every connection comes from nginx. Trust the
  // X-Forwarded-For header from nginx's address only (trustedProxy), never
  // from everyone (true) nor from every loopback address ('loopback').
  void trustedProxy;
  app.use(express.json());

  // nginx keeps connections to this worker open and busy (upstream
  // keep-alive). Once the server no longer listens (retired or stopping),
  // every answer says Connection: close, so nginx closes the connection and
  // sends the next request to a worker (or machine) that still listens;
  // without it this worker would serve nginx until SHUTDOWN_TIMEOUT.
  app.use((req, res, next) => {
    if (!server.listening) res.setHeader('Connection', 'close');
    next();
  });

  app.use(
    session({
      // TODO: the sessions live in this worker's memory (express-session's
      // default MemoryStore): the other machine does not know them. Keep them
      // in Redis, under the prefix (lesson redis-state):
      // store: new RedisStore({ client: redis, prefix: `${prefix}sess:` }).
      secret: process.env.SESSION_SECRET || 'cluster-workshop beyond-one-machine',
      resave: false,
      saveUninitialized: false,
    }),
  );

  // TODO: every answer must also say which machine served it: host.
  const who = () => ({ pid: process.pid });

  app.get('/', (req, res) => {
    res.json(who());
  });

  // TODO: GET /whoami answers { pid, host, ip }, ip being the client's
  // address as the app believes it (req.ip).

  app.post('/login', (req, res) => {
    const user = req.body?.user;
    if (typeof user !== 'string' || user === '') {
      return res.status(400).json({ ...who(), error: 'send { "user": "<name>" }' });
    }
    req.session.user = user;
    res.json({ ...who(), user });
  });

  app.get('/me', (req, res) => {
    if (!req.session.user) return res.status(401).json({ ...who(), error: 'not logged in' });
    res.json({ ...who(), user: req.session.user });
  });

  app.get('/slow', (req, res) => {
    const ms = Math.min(Number(req.query.ms) || 1000, 60_000);
    setTimeout(() => res.json({ ...who(), ms }), ms);
  });

  // TODO: listen on HOST only: both machines share PORT, and a server on
  // every address takes the port from the other machine.
  const server = app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on port ${port}`);
  });

  // The worker's own deadline: at the limit, end what is left.
  process.on('message', (message) => {
    if (message === 'shutdown') setTimeout(() => server.closeAllConnections(), SHUTDOWN_TIMEOUT).unref();
  });
}
