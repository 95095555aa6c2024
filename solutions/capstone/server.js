// The capstone lesson (capstone): one cluster with everything from the course: respawn
// with crash-loop protection, config broadcast, graceful shutdown, rolling
// restart, a counter held by the primary, and heartbeats.
import cluster from 'node:cluster';
import os from 'node:os';
import { existsSync } from 'node:fs';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;
const heartbeatTimeout = Number(process.env.HEARTBEAT_TIMEOUT) || 3000;
const heartbeatInterval = Math.max(50, Math.floor(heartbeatTimeout / 4));
const memoryLimitMb = Number(process.env.MEMORY_LIMIT_MB) || 512;
// The time limit of a drain: at the limit the worker ends its remaining
// connections itself; the primary's SIGKILL, a moment later, is for a worker
// that can no longer run code.
const SHUTDOWN_TIMEOUT = Number(process.env.SHUTDOWN_TIMEOUT) || 10_000;
const KILL_GRACE_MS = 500;
const STARTUP_DEATH_MS = 1000; // dying this soon after fork counts toward a crash loop
const CRASH_LOOP_DEATHS = 5;
const CRASH_LOOP_WINDOW_MS = 10_000;

if (cluster.isPrimary) {
  let config = {};
  let count = 0;
  let shuttingDown = false;
  let restarting = false;
  let crashLoop = false; // respawning stopped until SIGUSR2
  let startupDeaths = []; // times of deaths within STARTUP_DEATH_MS of fork
  const lastBeat = new Map(); // worker.id -> time of its last heartbeat
  // Every worker process still running, retiring ones included. Not
  // cluster.workers: disconnect() removes a worker from that list at once,
  // long before it has finished its requests and exited.
  const live = new Map(); // worker.id -> worker

  console.log(`primary ${process.pid} forking ${workerCount} workers`);

  const fork = () => {
    // The config travels in the environment, so a replacement knows it from
    // its first request on, before any message could reach it.
    const worker = cluster.fork({ CLUSTER_CONFIG: JSON.stringify(config) });
    worker.forkedAt = Date.now();
    live.set(worker.id, worker);
    worker.on('listening', () => lastBeat.set(worker.id, Date.now()));
    worker.on('message', (msg) => onMessage(worker, msg));
    // Sending to or disconnecting a worker that has just died emits 'error'
    // (EPIPE, channel closed): without a listener it crashes the primary.
    worker.on('error', (err) => console.log(`worker ${worker.process.pid}: ${err.message}`));
    return worker;
  };

  const sendTo = (worker, msg) => {
    // A worker that just died is still in the list for a moment: sending to
    // it would throw (ERR_IPC_CHANNEL_CLOSED) and take the primary down.
    if (!worker.isConnected()) return;
    worker.send(msg, (err) => {
      if (err) console.log(`could not reach worker ${worker.process.pid}: ${err.message}`);
    });
  };

  function onMessage(worker, msg) {
    switch (msg?.type) {
      case 'heartbeat':
        lastBeat.set(worker.id, Date.now());
        if (msg.rssMb > memoryLimitMb && !worker.retiring && !shuttingDown) {
          console.log(`worker ${worker.process.pid} uses ${msg.rssMb} MB > ${memoryLimitMb} MB; replacing it`);
          replace(worker);
        }
        break;
      case 'set-config':
        config = msg.config;
        for (const w of live.values()) sendTo(w, { type: 'config', config });
        break;
      case 'count':
        // The primary is the one place the counter lives; the id lets the
        // worker match this answer to the request that asked.
        if (msg.increment) count += 1;
        sendTo(worker, { type: 'count', id: msg.id, count });
        break;
    }
  }

  const listening = (worker) =>
    new Promise((resolve) => {
      const onListening = () => {
        worker.off('exit', onExit);
        resolve(true);
      };
      const onExit = () => {
        worker.off('listening', onListening);
        resolve(false);
      };
      worker.once('listening', onListening);
      worker.once('exit', onExit);
    });

  /** Retires a worker: it stops taking connections, finishes the ones it has, exits. */
  const retire = (worker) => {
    worker.retiring = true;
    // It may have died meanwhile (killed, hung and caught by the heartbeat).
    if (worker.isDead()) return Promise.resolve();
    const exited = new Promise((resolve) => worker.once('exit', resolve));
    if (worker.isConnected()) {
      sendTo(worker, { type: 'shutdown' }); // starts the worker's own deadline; arrives before the disconnect
      worker.disconnect();
    }
    const timer = setTimeout(() => worker.process.kill('SIGKILL'), SHUTDOWN_TIMEOUT + KILL_GRACE_MS);
    timer.unref();
    exited.then(() => clearTimeout(timer));
    return exited;
  };

  /** Replaces one worker with no dip in capacity: the new one listens before the old one leaves. */
  async function replace(old) {
    old.retiring = true;
    const fresh = fork();
    fresh.replacing = true;
    const ok = await listening(fresh);
    fresh.replacing = false;
    if (!ok) {
      old.retiring = false; // the replacement died: keep the old one serving
      return false;
    }
    await retire(old);
    return true;
  }

  async function rollingRestart() {
    // One restart at a time: a second SIGUSR2 while one runs is ignored.
    if (restarting || shuttingDown) return console.log('SIGUSR2 ignored: a restart or shutdown is running');
    restarting = true;
    if (crashLoop) console.log('SIGUSR2: leaving crash-loop mode, forking again');
    crashLoop = false;
    startupDeaths = [];
    try {
      // Fill the slots a crash loop left empty first, then replace the old ones.
      const old = [...live.values()].filter((w) => !w.retiring);
      for (let missing = workerCount - old.length; missing > 0 && !shuttingDown; missing--) {
        if (!(await listening(fork()))) return console.log('rolling restart stopped: a new worker died at start-up');
      }
      for (const worker of old) {
        if (shuttingDown) break;
        if (worker.isDead() || worker.retiring) continue;
        if (!(await replace(worker))) return console.log('rolling restart stopped: a new worker died at start-up');
      }
      console.log('rolling restart done');
    } finally {
      restarting = false;
    }
  }

  function shutdown(signal) {
    if (shuttingDown) return;
    shuttingDown = true;
    console.log(`${signal}: draining ${live.size} workers`);
    if (live.size === 0) process.exit(0);
    const workers = [...live.values()];
    // disconnect() closes each worker's server (no new connections) and lets
    // the requests in flight finish; the worker then exits by itself.
    for (const worker of workers) retire(worker);
  }

  cluster.on('exit', (worker, code, signal) => {
    lastBeat.delete(worker.id);
    live.delete(worker.id);
    const how = signal ?? `code ${code}`;
    if (shuttingDown) {
      // Exit only once the last worker is gone: exiting earlier would kill
      // the ones still finishing requests.
      if (live.size === 0) {
        console.log('all workers done; primary exits');
        process.exit(0);
      }
      return;
    }
    // Retired on purpose, or a restart's new worker that failed (the restart
    // handles that): no replacement.
    if (worker.retiring || worker.replacing) return;
    if (Date.now() - worker.forkedAt < STARTUP_DEATH_MS) {
      const now = Date.now();
      startupDeaths = [...startupDeaths.filter((t) => now - t < CRASH_LOOP_WINDOW_MS), now];
      if (startupDeaths.length >= CRASH_LOOP_DEATHS) {
        if (!crashLoop) {
          console.log(
            `crash loop: ${startupDeaths.length} workers died within ${STARTUP_DEATH_MS} ms of starting in the last ${CRASH_LOOP_WINDOW_MS / 1000} s; ` +
              'not respawning until SIGUSR2 (fix the cause first)',
          );
        }
        crashLoop = true;
      }
    }
    if (crashLoop) return;
    console.log(`worker ${worker.process.pid} died (${how}); forking a replacement`);
    fork();
  });

  // Heartbeat check, on the primary's own timer: a hung worker sends nothing.
  setInterval(() => {
    const now = Date.now();
    for (const [id, at] of lastBeat) {
      const worker = live.get(id);
      if (!worker) lastBeat.delete(id);
      else if (now - at > heartbeatTimeout) {
        console.log(`worker ${worker.process.pid} silent for ${now - at} ms; killing it`);
        lastBeat.delete(id);
        worker.process.kill('SIGKILL');
      }
    }
  }, Math.max(25, Math.floor(heartbeatInterval / 2)));

  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGUSR2', () => rollingRestart());

  for (let i = 0; i < workerCount; i++) fork();
} else {
  // Messages can arrive while express still loads: listen for them first.
  let config = JSON.parse(process.env.CLUSTER_CONFIG || '{}');
  const waiting = new Map(); // request id -> resolve
  let nextId = 0;
  let server = null;
  process.on('message', (msg) => {
    if (msg?.type === 'config') config = msg.config;
    // The worker's own deadline: at the limit, end what is left.
    if (msg?.type === 'shutdown') setTimeout(() => server?.closeAllConnections(), SHUTDOWN_TIMEOUT).unref();
    if (msg?.type === 'count') {
      waiting.get(msg.id)?.(msg.count);
      waiting.delete(msg.id);
    }
  });
  // Ctrl-C (SIGINT) and systemd's stop (SIGTERM) reach every process of the
  // group: the primary drains the workers, so a worker must not die of
  // either on its own.
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});

  // POISON_FILE: the verifier's way to make start-up fail, as a bad deploy would.
  if (process.env.POISON_FILE && existsSync(process.env.POISON_FILE)) {
    throw new Error(`worker ${process.pid}: ${process.env.POISON_FILE} exists, refusing to start`);
  }

  const { default: express } = await import('express');
  const app = express();
  // Once the server no longer listens (retired or shutting down), every
  // answer says Connection: close: keep-alive clients go to a worker that
  // still listens instead of keeping this one alive.
  app.use((req, res, next) => {
    if (server && !server.listening) res.setHeader('Connection', 'close');
    next();
  });
  app.use(express.json({ strict: false }));

  let expected = Date.now() + heartbeatInterval;
  const beat = setInterval(() => {
    const now = Date.now();
    const lagMs = Math.max(0, now - expected);
    expected = now + heartbeatInterval;
    if (process.connected) process.send({ type: 'heartbeat', rssMb: Math.round(process.memoryUsage().rss / 1e6), lagMs });
  }, heartbeatInterval);
  beat.unref(); // a drained worker must be able to exit

  const askCount = (increment) =>
    new Promise((resolve, reject) => {
      if (!process.connected) return reject(new Error('not connected to the primary'));
      const id = ++nextId;
      waiting.set(id, resolve);
      process.send({ type: 'count', id, increment });
    });

  app.get('/', (req, res) => res.json({ pid: process.pid }));

  app.get('/heavy', (req, res) => {
    const ms = Math.min(Number(req.query.ms) || 100, 10_000);
    const end = Date.now() + ms;
    while (Date.now() < end) {
      // burn
    }
    res.json({ pid: process.pid, ms });
  });

  app.get('/slow', (req, res) => {
    const ms = Math.min(Number(req.query.ms) || 100, 30_000);
    setTimeout(() => res.json({ pid: process.pid, ms }), ms);
  });

  app.get('/config', (req, res) => res.json({ pid: process.pid, config }));

  app.post('/config', (req, res) => {
    const body = req.body;
    if (typeof body !== 'object' || body === null || Array.isArray(body)) {
      return res.status(400).json({ pid: process.pid, error: 'the body must be a JSON object' });
    }
    // Through the primary, which tells everyone (this worker included).
    config = body;
    process.send({ type: 'set-config', config: body });
    res.json({ pid: process.pid, config: body });
  });

  app.post('/count', async (req, res, next) => {
    try {
      res.json({ pid: process.pid, count: await askCount(true) });
    } catch (err) {
      next(err);
    }
  });

  app.get('/count', async (req, res, next) => {
    try {
      res.json({ pid: process.pid, count: await askCount(false) });
    } catch (err) {
      next(err);
    }
  });

  app.get('/hang', () => {
    for (;;) {
      // hang
    }
  });

  app.get('/crash', () => {
    setImmediate(() => {
      throw new Error(`worker ${process.pid} crashed on purpose (GET /crash)`);
    });
  });

  // A malformed JSON body is the client's mistake: 400, not a crash or a 500.
  app.use((err, req, res, next) => {
    if (err.type === 'entity.parse.failed') return res.status(400).json({ pid: process.pid, error: 'invalid JSON' });
    next(err);
  });

  server = app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });
}
