// Blind-authored (written from the lesson text alone), author's note: ESM + express capstone; start-up deaths kept in a Map by worker id (pruned to 10 s), cleared on SIGUSR2; no intended mistake.
// expect: pass
import cluster from 'node:cluster';
import http from 'node:http';
import net from 'node:net';
import os from 'node:os';
import fs from 'node:fs';
import express from 'express';

const PORT = Number(process.env.PORT || 3000);
const WORKERS = Number(process.env.WORKERS) || os.availableParallelism();
const HB = Number(process.env.HEARTBEAT_TIMEOUT) || 3000;
const SHUTDOWN_TIMEOUT = Number(process.env.SHUTDOWN_TIMEOUT) || 5000;
const STARTUP_DEATH_MS = 1000;
const LOOP_WINDOW_MS = 10000;
const LOOP_LIMIT = 5;

const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

if (cluster.isPrimary) primary();
else worker();

function primary() {
  let config = {};
  let count = 0;
  const live = new Map();       // id -> worker; deleted only on 'exit'
  const forkedAt = new Map();   // id -> Date.now() when forked
  const lastBeat = new Map();   // id -> last heartbeat (tracked from 'listening')
  const retired = new Set();    // ids retired on purpose (restart / shutdown)
  const killTimers = new Map();
  const startupDeaths = new Map(); // worker id -> Date.now() of its start-up death
  let loopStopped = false;
  let shuttingDown = false;
  let restarting = false;
  let restartQueued = false;

  const safeSend = (w, msg) => {
    try { if (w.isConnected()) w.send(msg, () => {}); } catch { /* worker just died */ }
  };
  const active = () => [...live.values()].filter((w) => !retired.has(w.id));


  function spawn() {
    const w = cluster.fork({ WORKER_CONFIG: JSON.stringify(config) });
    forkedAt.set(w.id, Date.now());
    live.set(w.id, w);
    w.on('error', () => {});
    w.on('message', (msg) => onMessage(w, msg));
    w.on('listening', () => {
      if (retired.has(w.id)) { safeSend(w, { type: 'stop' }); return; }
      lastBeat.set(w.id, Date.now());
      safeSend(w, { type: 'config', config });
    });
    return w;
  }

  function onMessage(w, msg) {
    if (!isObj(msg)) return;
    if (msg.type === 'hb') {
      if (lastBeat.has(w.id)) lastBeat.set(w.id, Date.now());
    } else if (msg.type === 'count') {
      if (msg.op === 'inc') count += 1;
      safeSend(w, { type: 'count', id: msg.id, count });
    } else if (msg.type === 'config' && isObj(msg.config)) {
      config = msg.config;
      for (const x of live.values()) safeSend(x, { type: 'config', config });
    } else if (msg.type === 'drained') {
      try { w.disconnect(); } catch { /* already gone */ }
    }
  }

  function retire(w) {
    if (retired.has(w.id)) return;
    retired.add(w.id);
    lastBeat.delete(w.id);
    safeSend(w, { type: 'stop' });
    killTimers.set(w.id, setTimeout(() => {
      if (live.has(w.id)) { try { w.process.kill('SIGKILL'); } catch { /* gone */ } }
    }, SHUTDOWN_TIMEOUT + 500));
  }

  cluster.on('exit', (w) => {
    const now = Date.now();
    const born = forkedAt.get(w.id);
    forkedAt.delete(w.id);
    live.delete(w.id);
    lastBeat.delete(w.id);
    clearTimeout(killTimers.get(w.id));
    killTimers.delete(w.id);
    const wasRetired = retired.delete(w.id);
    if (shuttingDown) {
      if (live.size === 0) process.exit(0);
      return;
    }
    if (wasRetired) return;
    if (born !== undefined && now - born < STARTUP_DEATH_MS) {
      startupDeaths.set(w.id, now);
      for (const [id, t] of startupDeaths) if (now - t > LOOP_WINDOW_MS) startupDeaths.delete(id);
      if (!loopStopped && startupDeaths.size >= LOOP_LIMIT) {
        loopStopped = true;
        console.error(`[primary ${process.pid}] crash loop: ${startupDeaths.size} workers died within ${STARTUP_DEATH_MS} ms of start-up in the last ${LOOP_WINDOW_MS / 1000} s; no longer respawning. Fix the cause, then send SIGUSR2.`);
      }
    }
    if (loopStopped) return;
    spawn();
  });

  const hbTimer = setInterval(() => {
    if (shuttingDown) return;
    const now = Date.now();
    for (const [id, t] of lastBeat) {
      const w = live.get(id);
      if (!w || retired.has(id)) continue;
      if (now - t > HB * 1.5) {
        lastBeat.delete(id);
        console.error(`[primary] worker ${w.process.pid} silent for ${Math.round(now - t)} ms: SIGKILL`);
        try { w.process.kill('SIGKILL'); } catch { /* gone */ }
      }
    }
  }, Math.max(50, Math.floor(HB / 4)));

  function waitListening(w) {
    return new Promise((resolve) => {
      const onL = () => { done(); resolve(true); };
      const onE = () => { done(); resolve(false); };
      const done = () => { w.off('listening', onL); w.off('exit', onE); };
      w.on('listening', onL);
      w.on('exit', onE);
    });
  }

  async function rollingRestart() {
    if (shuttingDown) return;
    if (restarting) { restartQueued = true; return; }
    restarting = true;
    try {
      do {
        restartQueued = false;
        startupDeaths.clear(); // SIGUSR2: forget the counted start-up deaths
        loopStopped = false;
        const old = active();
        while (!shuttingDown && !loopStopped && active().length < WORKERS) {
          await waitListening(spawn());
        }
        for (const o of old) {
          if (shuttingDown || loopStopped) break;
          if (!live.has(o.id) || retired.has(o.id)) continue;
          if (active().length <= WORKERS) {
            await waitListening(spawn());
            if (shuttingDown || loopStopped) break;
          }
          if (live.has(o.id) && !retired.has(o.id) && active().length > WORKERS) retire(o);
        }
      } while (restartQueued && !shuttingDown);
    } finally {
      restarting = false;
    }
  }

  function shutdown() {
    if (shuttingDown) return;
    shuttingDown = true;
    clearInterval(hbTimer);
    if (live.size === 0) process.exit(0);
    for (const w of live.values()) retire(w);
    setTimeout(() => {
      for (const w of live.values()) { try { w.process.kill('SIGKILL'); } catch { /* gone */ } }
    }, SHUTDOWN_TIMEOUT + 300);
    setTimeout(() => process.exit(0), SHUTDOWN_TIMEOUT + 1500);
  }

  process.on('SIGTERM', shutdown);
  process.on('SIGINT', shutdown);
  process.on('SIGUSR2', () => { rollingRestart().catch((e) => console.error(e)); });

  for (let i = 0; i < WORKERS; i++) spawn();
}

function worker() {
  if (process.env.POISON_FILE && fs.existsSync(process.env.POISON_FILE)) {
    throw new Error(`poison file ${process.env.POISON_FILE} exists: refusing to start`);
  }
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});

  let config = {};
  try { const c = JSON.parse(process.env.WORKER_CONFIG || '{}'); if (isObj(c)) config = c; } catch { /* keep {} */ }
  let draining = false;
  let listened = false;
  let closed = false;
  let drainedSent = false;
  let seq = 0;
  const pending = new Map();
  const sockets = new Set();

  const beat = () => { if (process.connected) process.send({ type: 'hb' }, () => {}); };
  const hbTimer = setInterval(beat, Math.max(50, Math.floor(HB / 4)));
  hbTimer.unref();
  beat();

  process.on('message', (msg) => {
    if (!isObj(msg)) return;
    if (msg.type === 'config' && isObj(msg.config)) config = msg.config;
    else if (msg.type === 'count') {
      const p = pending.get(msg.id);
      if (p) { pending.delete(msg.id); p(msg.count); }
    } else if (msg.type === 'stop') startDrain();
  });

  function send(res, status, body) {
    if (res.headersSent || res.writableEnded || res.destroyed) return;
    if (draining) res.set('Connection', 'close');
    res.status(status).json(body);
  }

  function askCount(op) {
    return new Promise((resolve) => {
      if (!process.connected) return resolve(null);
      const id = ++seq;
      pending.set(id, resolve);
      process.send({ type: 'count', op, id }, (err) => {
        if (err && pending.has(id)) { pending.delete(id); resolve(null); }
      });
    });
  }

  function endIfIdle(sock, force) {
    if (sock._active === 0 && (sock._served > 0 || force) && !sock.destroyed) {
      sock.end();
      setTimeout(() => sock.destroy(), 1000).unref();
    }
  }

  function maybeDrained() {
    if (!draining || !closed || drainedSent || sockets.size > 0 || pending.size > 0) return;
    drainedSent = true;
    if (process.connected) process.send({ type: 'drained' }, () => {});
    else process.exit(0);
  }

  function closeServer() {
    closed = true;
    // stop accepting, but keep connections already accepted (a late sender's request is still served)
    net.Server.prototype.close.call(server, () => {});
    for (const s of sockets) endIfIdle(s, false);
    setTimeout(() => { for (const s of sockets) endIfIdle(s, true); }, 1500).unref();
    setTimeout(() => { server.closeAllConnections(); }, SHUTDOWN_TIMEOUT).unref();
    maybeDrained();
  }

  function startDrain() {
    if (draining) return;
    draining = true;
    clearInterval(hbTimer);
    if (listened) closeServer();
  }

  const app = express();
  app.disable('x-powered-by');
  app.use((req, res, next) => {
    const sock = req.socket;
    sock._active += 1;
    res.on('close', () => {
      sock._active -= 1;
      sock._served += 1;
      if (draining) endIfIdle(sock, false);
      maybeDrained();
    });
    next();
  });
  const msq = (req) => {
    const n = Number(req.query.ms);
    return Number.isFinite(n) && n > 0 ? Math.min(n, 120000) : 0;
  };
  const pid = process.pid;

  app.get('/', (req, res) => send(res, 200, { pid }));
  app.get('/heavy', (req, res) => {
    const ms = msq(req);
    const end = Date.now() + ms;
    while (Date.now() < end) { /* busy */ }
    send(res, 200, { pid, ms });
  });
  app.get('/crash', () => {
    setImmediate(() => { throw new Error('crash requested'); });
  });
  app.get('/slow', (req, res) => {
    setTimeout(() => send(res, 200, { pid }), msq(req));
  });
  app.get('/hang', () => {
    for (;;) { /* block the event loop forever */ }
  });
  app.get('/config', (req, res) => send(res, 200, { pid, config }));
  app.post('/config', express.text({ type: () => true, limit: '1mb' }), (req, res) => {
    let body;
    try { body = JSON.parse(typeof req.body === 'string' ? req.body : ''); } catch { body = undefined; }
    if (!isObj(body)) return send(res, 400, { pid, error: 'body must be a JSON object' });
    config = body;
    if (process.connected) process.send({ type: 'config', config: body }, () => {});
    send(res, 200, { pid, config });
  });
  const count = (op) => (req, res) => {
    askCount(op).then((c) => {
      if (c === null) send(res, 503, { pid, error: 'primary unreachable' });
      else send(res, 200, { pid, count: c });
    });
  };
  app.post('/count', count('inc'));
  app.get('/count', count('get'));
  app.use((req, res) => send(res, 404, { pid, error: 'not found' }));
  app.use((err, req, res, next) => send(res, err.status || err.statusCode || 500, { pid, error: String(err.message || err) }));

  const server = http.createServer(app);

  server.on('connection', (sock) => {
    sock._active = 0;
    sock._served = 0;
    sockets.add(sock);
    sock.on('close', () => { sockets.delete(sock); maybeDrained(); });
  });

  server.listen(PORT, () => {
    listened = true;
    if (draining) closeServer();
  });
}
