// The worker-threads lesson (worker-threads): one process whose /heavy runs on a fixed
// pool of THREADS worker threads, so the main thread's event loop stays free.
import { Worker, isMainThread, parentPort, threadId } from 'node:worker_threads';
import os from 'node:os';

// The CPU-heavy part of a request, as in the bottleneck lesson. A negative ms
// throws, so the lesson can show what a failing task does to the pool.
function burn(ms) {
  if (!(ms >= 0)) throw new RangeError(`ms must be a number >= 0, got ${ms}`);
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // burn: only this thread is busy, the main thread keeps answering
  }
}

if (!isMainThread) {
  // A worker thread: this same file, started by new Worker() below. It runs
  // one task at a time and answers with postMessage.
  parentPort.on('message', ({ id, ms }) => {
    try {
      burn(ms);
      parentPort.postMessage({ id, ms, threadId });
    } catch (err) {
      // Caught here, the error costs one request a 500 and the thread goes
      // on: cheaper than starting a replacement.
      parentPort.postMessage({ id, error: err.message });
    }
  });
} else {
  // Only the main thread serves HTTP: the threads never load express.
  const { default: express } = await import('express');

  // THREADS decides the pool's size; availableParallelism() is the number of
  // cores this process may use, the most threads that can burn at once.
  const size = Number(process.env.THREADS) || os.availableParallelism();
  const port = Number(process.env.PORT) || 3000;

  // A fixed pool: `size` threads started once (starting a thread costs tens
  // of ms and a heap of its own, far too much per request), a queue for the
  // tasks that find every thread busy.
  class ThreadPool {
    constructor(size, file) {
      this.file = file;
      this.threads = new Set();
      this.idle = [];
      this.queue = [];
      this.running = new Map(); // thread -> its task
      this.nextId = 1;
      this.closing = false;
      for (let i = 0; i < size; i++) this.spawn();
    }

    spawn() {
      const thread = new Worker(this.file);
      this.threads.add(thread);
      thread.on('message', (answer) => {
        const task = this.running.get(thread);
        this.running.delete(thread);
        if (answer.error) task.reject(new Error(answer.error));
        else task.resolve(answer);
        this.free(thread);
      });
      // An error the thread did not catch ends the thread. Without this
      // listener the error would be thrown in the main thread and crash the
      // whole process.
      thread.on('error', (err) => this.running.get(thread)?.reject(err));
      // A thread that ended (an uncaught error, process.exit in a task, out of
      // memory) is replaced, so the pool keeps its size.
      thread.on('exit', () => {
        this.threads.delete(thread);
        this.idle = this.idle.filter((t) => t !== thread);
        this.running.get(thread)?.reject(new Error('the thread ended during the task'));
        this.running.delete(thread);
        if (!this.closing) this.spawn();
      });
      this.free(thread);
    }

    // A thread that is free takes the oldest waiting task, or waits itself.
    free(thread) {
      const task = this.queue.shift();
      if (task) this.start(thread, task);
      else this.idle.push(thread);
    }

    start(thread, task) {
      this.running.set(thread, task);
      thread.postMessage({ id: task.id, ms: task.ms });
    }

    run(ms) {
      return new Promise((resolve, reject) => {
        const task = { id: this.nextId++, ms, resolve, reject };
        const thread = this.idle.pop();
        if (thread) this.start(thread, task);
        else this.queue.push(task); // every thread is busy: wait in line
      });
    }

    async close() {
      this.closing = true;
      await Promise.all([...this.threads].map((t) => t.terminate()));
    }
  }

  // new URL(import.meta.url): this very file, run again on each thread.
  const pool = new ThreadPool(size, new URL(import.meta.url));

  const app = express();

  app.get('/', (req, res) => {
    res.json({ pid: process.pid });
  });

  app.get('/heavy', async (req, res) => {
    const ms = Math.min(Number(req.query.ms ?? 100), 10_000);
    try {
      const answer = await pool.run(ms);
      res.json({ pid: process.pid, ms, threadId: answer.threadId });
    } catch (err) {
      res.status(500).json({ pid: process.pid, error: err.message });
    }
  });

  const server = app.listen(port, (err) => {
    if (err) throw err;
    console.log(`pid ${process.pid} listening on http://localhost:${port} with ${size} threads`);
  });

  // Live threads keep the process alive: terminate them, then exit with 0.
  process.on('SIGTERM', async () => {
    server.close();
    await pool.close();
    process.exit(0);
  });
}
