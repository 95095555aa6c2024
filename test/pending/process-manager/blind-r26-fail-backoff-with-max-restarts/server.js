// Blind-authored (written from the lesson text alone), author's note:
// Express ESM server that follows the whole contract. ecosystem.config.cjs has the right
// exp_backoff_restart_delay: 100, but also max_restarts: 5 with min_uptime: 60000
// ('give up after 5 quick crashes', common in real configs): PM2 counts every death
// within 60 s of start as unstable and marks the app errored, so it never comes back.
// expect: fail at crash-loop
// expect-text: errored, did not come back after file removed
import cluster from 'node:cluster';
import fs from 'node:fs';
import express from 'express';

const crashFile = process.env.CRASH_FILE;
if (crashFile && fs.existsSync(crashFile)) {
  console.error(`CRASH_FILE ${crashFile} exists: instance ${process.pid} exits at start-up`);
  process.exit(1);
}

const PORT = Number(process.env.PORT) || 3000;
const STARTUP_MS = Number(process.env.STARTUP_MS) || 0;

let readyAt = null;
let closing = false;
let server = null;
let startupTimer = null;
const leaks = [];

function answer(res, extra = {}, status = 200) {
  if (closing) res.set('Connection', 'close');
  res.status(status).json({ pid: process.pid, readyAt, ...extra });
}

const app = express();
app.get('/', (req, res) => answer(res));
app.get('/slow', (req, res) => {
  const ms = Math.max(0, Number(req.query.ms) || 0);
  setTimeout(() => answer(res, { ms }), ms);
});
app.post('/grow', (req, res) => {
  const mb = Math.max(0, Number(req.query.mb) || 0);
  leaks.push(Buffer.alloc(mb * 1024 * 1024, 1));
  answer(res, { rss: process.memoryUsage().rss });
});
app.use((req, res) => answer(res, { error: 'not found' }, 404));

process.on('SIGINT', () => {
  if (closing) return;
  closing = true;
  if (startupTimer) { clearTimeout(startupTimer); startupTimer = null; }
  if (cluster.worker) cluster.worker.disconnect();
  else if (server) server.close();
});

// start-up work: a cache that takes STARTUP_MS to load
startupTimer = setTimeout(() => {
  startupTimer = null;
  readyAt = Date.now();
  server = app.listen(PORT, () => {
    if (process.send) process.send('ready');
  });
}, STARTUP_MS);
