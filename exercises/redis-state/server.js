// The redis-state lesson (redis-state): keep the counter and the sessions in Redis.
// Needs a Redis server: redis-server, or docker run -p 6379:6379 redis
// Run it:    PORT=3000 WORKERS=3 REDIS_PREFIX=dev: node server.js
// Try it:    curl -s -X POST http://127.0.0.1:3000/count
//            curl -s -c cookies.txt -H 'content-type: application/json' -d '{"user":"ada"}' http://127.0.0.1:3000/login
//            curl -s -b cookies.txt http://127.0.0.1:3000/me
// Check it:  {{cli}} verify redis-state server.js
import cluster from 'node:cluster';
import os from 'node:os';
import express from 'express';
import session from 'express-session';
import { RedisStore } from 'connect-redis';
import { Redis } from 'ioredis';

const workerCount = Number(process.env.WORKERS) || os.availableParallelism();
const port = Number(process.env.PORT) || 3000;
const redisUrl = process.env.REDIS_URL || 'redis://127.0.0.1:6379';
// Every key this program writes must start with this prefix.
const prefix = process.env.REDIS_PREFIX ?? 'cluster-workshop:';

if (cluster.isPrimary) {
  console.log(`primary ${process.pid} forking ${workerCount} workers`);
  for (let i = 0; i < workerCount; i++) cluster.fork();

  let stopping = false;
  cluster.on('exit', (worker, code, signal) => {
    if (stopping) return;
    console.log(`worker ${worker.process.pid} died (${signal ?? `code ${code}`}); forking a replacement`);
    cluster.fork();
  });

  // Graceful stop (the graceful-shutdown lesson): the workers finish and end, then the primary
  // ends by itself with code 0.
  process.on('SIGTERM', () => {
    stopping = true;
    for (const worker of Object.values(cluster.workers)) worker.disconnect();
  });
} else {
  const redis = new Redis(redisUrl);
  redis.on('error', (err) => console.error(`redis: ${err.message}`));
  // TODO: when this worker disconnects (cluster.worker.on('disconnect', ...)),
  // close the Redis connection (redis.quit()): an open connection keeps the
  // drained worker alive forever, and SIGTERM never ends the program.

  // The bug this lesson starts from: a count in each worker's memory.
  // TODO: remove it; keep the count in Redis under `${prefix}count`.
  let count = 0;

  const app = express();
  app.use(express.json());
  app.use(
    session({
      // TODO: keep the sessions in Redis, so every worker finds them:
      // store: new RedisStore({ client: redis, prefix: `${prefix}sess:` }).
      // (Without a store, express-session keeps them in this worker's memory.)
      secret: 'cluster-workshop the redis-state lesson',
      resave: false,
      saveUninitialized: false,
    }),
  );

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.post('/count', async (req, res) => {
    // TODO: one atomic step in Redis: const count = await redis.incr(...)
    count += 1;
    res.json({ pid: process.pid, count });
  });

  app.get('/count', async (req, res) => {
    // TODO: read the count from Redis (a missing key means 0).
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
