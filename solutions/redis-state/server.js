// The redis-state lesson (redis-state): the counter and the sessions live in Redis, so any
// worker serves any request and the state outlives the cluster.
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';
import session from 'express-session';
import { RedisStore } from 'connect-redis';
import { Redis } from 'ioredis';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;
const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
// Every key starts with the prefix, so this program never touches other data
// in the same Redis (the verifier gives a fresh prefix per run).
const prefix = process.env.REDIS_PREFIX ?? 'cluster-workshop:';

if (cluster.isPrimary) {
  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) cluster.fork();

  let stopping = false;
  cluster.on('exit', (worker, code, signal) => {
    // A worker that ends because we are stopping is not replaced.
    if (stopping) return;
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    cluster.fork();
  });

  // Graceful stop (the graceful-shutdown lesson): disconnect every worker and let the primary end
  // on its own once the last worker has exited (it holds nothing else open),
  // with exit code 0.
  process.on('SIGTERM', () => {
    stopping = true;
    console.log('SIGTERM: disconnecting the workers');
    for (const worker of Object.values(cluster.workers)) worker.disconnect();
  });
} else {
  // One connection per worker, shared by the counter and the session store.
  const redis = new Redis(redisUrl);
  redis.on('error', (err) => console.error(`redis: ${err.message}`));

  // The primary's worker.disconnect() closes this worker's server; once the
  // last connection is done, the worker disconnects. An open Redis connection
  // would keep the worker alive forever: close it so the process can end.
  cluster.worker.on('disconnect', () => redis.quit());

  const app = express();
  app.use(express.json());
  app.use(
    session({
      // Sessions in Redis: a session created by one worker is found by all.
      store: new RedisStore({ client: redis, prefix: `${prefix}sess:` }),
      // The same secret in every worker (and every start): a cookie signed by
      // one worker must verify in the others. Set SESSION_SECRET in production.
      secret: process.env.SESSION_SECRET || 'cluster-workshop redis-state',
      resave: false,
      saveUninitialized: false,
    }),
  );

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.post('/count', async (req, res) => {
    // INCR is one atomic step in Redis: concurrent increments from all
    // workers never see the same value (a GET then a SET would).
    const count = await redis.incr(`${prefix}count`);
    res.json({ pid: process.pid, count });
  });

  app.get('/count', async (req, res) => {
    const count = Number(await redis.get(`${prefix}count`)) || 0;
    res.json({ pid: process.pid, count });
  });

  app.post('/login', (req, res) => {
    const user = req.body?.user;
    if (typeof user !== 'string' || user === '') {
      return res.status(400).json({ pid: process.pid, error: 'send { "user": "<name>" }' });
    }
    req.session.user = user;
    res.json({ pid: process.pid, user });
  });

  app.get('/me', (req, res) => {
    if (!req.session.user) return res.status(401).json({ pid: process.pid, error: 'not logged in' });
    res.json({ pid: process.pid, user: req.session.user });
  });

  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`worker ${process.pid} listening on http://localhost:${port}`);
  });
}
