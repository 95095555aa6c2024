// Blind-authored (written from the lesson text alone), author's note:
// Express ESM server that follows the whole contract (exit(1) on CRASH_FILE, timer
// start-up, listen then 'ready', SIGINT -> cluster.worker.disconnect()). The one mistake
// is in ecosystem.config.cjs: a fixed restart_delay: 100 instead of
// exp_backoff_restart_delay, so the pauses of a crash loop never grow.
// expect: fail at crash-loop
// expect-text: pause between restarts did not grow
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
