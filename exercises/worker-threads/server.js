// The worker-threads lesson (worker-threads): a fixed pool of THREADS worker threads runs /heavy.
// Run it:    PORT=3000 THREADS=3 node server.js
// Check it:  {{cli}} verify worker-threads server.js
import { isMainThread } from 'node:worker_threads';
import os from 'node:os';

// The CPU-heavy part of a request. A negative ms throws.
function burn(ms) {
  if (!(ms >= 0)) throw new RangeError(`ms must be a number >= 0, got ${ms}`);
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // burn
  }
}

if (!isMainThread) {
  // TODO: this branch runs on a worker thread (this same file, started with
  // new Worker(new URL(import.meta.url))). Take tasks from parentPort, run
  // burn(ms), and post back the answer with this thread's threadId; post the
  // error's message back when burn throws.
} else {
  const { default: express } = await import('express');
  const port = Number(process.env.PORT) || 3000;

  // TODO: a pool of Number(process.env.THREADS) || os.availableParallelism()
  // threads, started once, with a queue for tasks that find every thread busy.
  console.log(`${os.availableParallelism()} cores; no thread pool yet`);

  const app = express();

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/heavy', (req, res) => {
    const ms = Math.min(Number(req.query.ms ?? 100), 10_000);
    // TODO: run burn(ms) on a thread of the pool, not here, and answer
    // { pid, ms, threadId }; answer status 500 when the task throws.
    try {
      burn(ms);
      res.json({ pid: process.pid, ms });
    } catch (err) {
      res.status(500).json({ pid: process.pid, error: err.message });
    }
  });

  app.listen(port, (err) => {
    if (err) throw err;
    console.log(`pid ${process.pid} listening on http://localhost:${port}`);
  });

  // TODO: on SIGTERM, terminate the threads and exit with code 0.
}
