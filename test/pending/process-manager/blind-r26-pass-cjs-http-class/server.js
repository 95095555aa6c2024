// Blind-authored (written from the lesson text alone), author's note:
// Plain node:http in CommonJS (a package.json {"type":"commonjs"} sits beside it, as
// the lesson allows), organised as a class. CRASH_FILE is checked synchronously before
// anything else and ends the instance with process.exit(1); the start-up work is a
// timer; readyAt is set, then listen(), then process.send('ready') in the callback.
// expect: pass
'use strict';

const cluster = require('node:cluster');
const fs = require('node:fs');
const http = require('node:http');

// --- start-up guard: before any start-up work, before listening ---------------------
const crashFile = process.env.CRASH_FILE;
if (crashFile && fs.existsSync(crashFile)) {
  process.stderr.write(`[pid ${process.pid}] CRASH_FILE ${crashFile} exists: cannot start, exiting with code 1\n`);
  process.exit(1);
}

class InstanceServer {
  constructor({ port, startupMs }) {
    this.port = port;
    this.startupMs = startupMs;
    this.readyAt = null;
    this.draining = false;
    this.server = null;
    this.startupTimer = null;
    this.hoard = []; // memory kept referenced by POST /grow
  }

  start() {
    // The "cache load": nothing listens until it is done.
    this.startupTimer = setTimeout(() => {
      this.startupTimer = null;
      this.readyAt = Date.now();
      this.server = http.createServer((req, res) => this.handle(req, res));
      this.server.listen(this.port, () => {
        if (typeof process.send === 'function') process.send('ready');
      });
    }, this.startupMs);
  }

  body(extra) {
    return { pid: process.pid, readyAt: this.readyAt, ...extra };
  }

  // Headers are decided when the answer is written, so a request that began before
  // SIGINT and ends after it still tells its client to leave.
  reply(res, status, payload) {
    if (res.writableEnded || res.destroyed) return;
    const text = JSON.stringify(payload);
    const headers = {
      'Content-Type': 'application/json; charset=utf-8',
      'Content-Length': Buffer.byteLength(text),
    };
    if (this.draining) headers.Connection = 'close';
    res.writeHead(status, headers);
    res.end(text);
  }

  handle(req, res) {
    req.resume(); // no request body is used; let it flow
    const url = new URL(req.url, 'http://localhost');

    if (req.method === 'GET' && url.pathname === '/') {
      return this.reply(res, 200, this.body());
    }
    if (req.method === 'GET' && url.pathname === '/slow') {
      const ms = Math.max(0, Number(url.searchParams.get('ms')) || 0);
      setTimeout(() => this.reply(res, 200, this.body({ waited: ms })), ms);
      return undefined;
    }
    if (req.method === 'POST' && url.pathname === '/grow') {
      const mb = Math.max(0, Number(url.searchParams.get('mb')) || 0);
      this.hoard.push(Buffer.alloc(mb * 1024 * 1024, 1));
      return this.reply(res, 200, this.body({ rss: process.memoryUsage().rss, grownMb: mb }));
    }
    return this.reply(res, 404, this.body({ error: 'not found' }));
  }

  stop() {
    if (this.draining) return;
    this.draining = true;
    if (!this.server) {
      // SIGINT during the start-up work: never listen at all.
      if (this.startupTimer) clearTimeout(this.startupTimer);
      this.startupTimer = null;
      if (cluster.worker) cluster.worker.disconnect();
      return;
    }
    if (cluster.worker) {
      // Under PM2: closes the server, waits for the primary's acknowledgement, then
      // the IPC channel closes and the process ends by itself once idle.
      cluster.worker.disconnect();
    } else {
      this.server.close();
    }
  }
}

const instance = new InstanceServer({
  port: Number(process.env.PORT) || 3000,
  startupMs: Number(process.env.STARTUP_MS) || 0,
});
process.on('SIGINT', () => instance.stop());
instance.start();
