// Blind-authored (written from the lesson text alone), author's note:
// Express as an ES module; the CRASH_FILE check lives in ./crash-guard.js, imported
// first, and exits with process.exit(1). Start-up work is a cancellable timer, then
// readyAt, listen(), and 'ready' from the listen callback. SIGINT -> worker.disconnect().
// expect: pass
import './crash-guard.js';
import cluster from 'node:cluster';
import express from 'express';

const PORT = Number(process.env.PORT) || 3000;
const STARTUP_MS = Number(process.env.STARTUP_MS) || 0;

const state = { readyAt: null, stopping: false, server: null, warmup: null };
const retained = []; // POST /grow keeps its buffers here

function send(res, payload, status = 200) {
  // Checked at write time: a response that started before SIGINT ends with "close".
  if (state.stopping) res.set('Connection', 'close');
  res.status(status).json({ pid: process.pid, readyAt: state.readyAt, ...payload });
}

const api = express.Router();
api.get('/', (req, res) => send(res, {}));
api.get('/slow', (req, res) => {
  const ms = Math.max(0, Number.parseInt(req.query.ms, 10) || 0);
  setTimeout(() => send(res, { slept: ms }), ms);
});
api.post('/grow', (req, res) => {
  const mb = Math.max(0, Number.parseInt(req.query.mb, 10) || 0);
  retained.push(Buffer.alloc(mb * 1024 * 1024, 1));
  send(res, { rss: process.memoryUsage().rss, chunks: retained.length });
});

const app = express();
app.disable('x-powered-by');
app.use(api);
app.use((req, res) => send(res, { error: 'no such route' }, 404));
app.use((err, req, res, next) => send(res, { error: String(err && err.message) }, 500));

function goLive() {
  state.warmup = null;
  state.readyAt = Date.now();
  state.server = app.listen(PORT, () => {
    process.send?.('ready');
  });
}

process.on('SIGINT', () => {
  if (state.stopping) return;
  state.stopping = true;
  if (state.warmup) {
    clearTimeout(state.warmup); // stopped while warming up: never listen
    state.warmup = null;
  }
  if (cluster.worker) {
    cluster.worker.disconnect(); // closes the server, waits for PM2's ack, exits by itself
  } else if (state.server) {
    state.server.close();
  }
});

// The start-up work ("loading the cache"): nothing listens before it is over.
state.warmup = setTimeout(goLive, STARTUP_MS);
