// Blind-authored (written from the lesson text alone), author's note:
// Express ESM server, correct ecosystem file (exp_backoff_restart_delay: 100). The one
// mistake: when CRASH_FILE exists it throws an Error instead of process.exit(1). Under
// PM2 the ES module's throw becomes an unhandled rejection; the instance never exits,
// never listens, and counts as online: there is no crash loop at all.
// expect: fail at crash-loop
// expect-text: instance did not exit at start-up (no restarts)
import cluster from 'node:cluster';
import fs from 'node:fs';
import express from 'express';

// The learner's mistake: throw instead of process.exit(1). Under plain node this ends
// the process with code 1; under PM2 (ES module loaded by ProcessContainer.js) it is an
// unhandled rejection that PM2 logs, and the instance stays up, never listening.
const crashFile = process.env.CRASH_FILE;
if (crashFile && fs.existsSync(crashFile)) {
  throw new Error(`CRASH_FILE ${crashFile} exists: cannot start`);
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
