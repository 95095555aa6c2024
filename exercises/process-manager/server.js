// The process-manager lesson (process-manager): no cluster code here. PM2 is
// the primary (ecosystem.config.cjs beside this file). Run it by hand with:
//   PORT=3000 WORKERS=3 STARTUP_MS=2000 npx pm2-runtime start ecosystem.config.cjs
// Check it:  {{cli}} verify process-manager server.js
import { setTimeout as sleep } from 'node:timers/promises';
import express from 'express';

const port = Number(process.env.PORT) || 3000;
const STARTUP_MS = Number(process.env.STARTUP_MS) || 0;

// TODO: if process.env.CRASH_FILE is set and that file exists, print a line to
//       stderr and process.exit(1) at once (a throw does not end an ES module
//       under PM2).

const app = express();
let readyAt = null;

// TODO: once the server no longer listens (SIGINT came), answer with
//       Connection: close, so keep-alive clients leave.

app.get('/', (req, res) => {
  res.json({ pid: process.pid, readyAt });
});

app.get('/slow', (req, res) => {
  const ms = Math.min(Number(req.query.ms) || 1000, 60_000);
  setTimeout(() => res.json({ pid: process.pid, readyAt, ms }), ms);
});

// TODO: POST /grow?mb=N: keep N MB referenced (Buffer.alloc(N * 1024 * 1024, 1)
//       in a module-level array) and answer { pid, readyAt, rss }.

// TODO: the start-up work must come before listen(), and 'ready' after it:
//       this listens first, loads the "cache" later, and says ready at once.
process.send?.('ready');
const server = app.listen(port, () => {
  console.log(`instance ${process.pid} listening on http://localhost:${port}`);
});
await sleep(STARTUP_MS);
readyAt = Date.now();

// TODO: PM2 stops an instance with SIGINT: close the server, let requests in
//       flight finish and keep-alive clients leave, then exit 0.
