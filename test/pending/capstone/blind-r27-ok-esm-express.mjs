// blind-r27-ok-esm-express.mjs: a correct answer to the capstone, as an ES
// module whose workers serve with express 5. Crash-loop accounting is a
// sliding window: an array of the timestamps of start-up deaths (deaths within
// 1 s of that worker's fork), pruned to the last 10 s; 5 in it stops respawns.
// expect: fail at shutdown-clean
// expect-text: was still running after the primary exited
// (authored as a pass; the author counted live workers in cluster.workers, which
// disconnect() empties at once, so the primary exits at the first worker exit:
// the mistake lesson graceful-shutdown names. The verdict was right.)

import cluster from 'node:cluster';
import http from 'node:http';
import fs from 'node:fs';
import os from 'node:os';
import express from 'express';

const env = process.env;
const PORT = Number(env.PORT) || 3000;
const WORKERS = Number(env.WORKERS) || os.availableParallelism();
const HEARTBEAT_TIMEOUT = Number(env.HEARTBEAT_TIMEOUT) || 3000;
const SHUTDOWN_TIMEOUT = Number(env.SHUTDOWN_TIMEOUT) || 10000;
const POISON_FILE = env.POISON_FILE;
const BEAT_MS = Math.max(50, Math.round(HEARTBEAT_TIMEOUT / 5));

const plainObject = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);

if (cluster.isPrimary) {
  let config = {};
  let counter = 0;
  let stopping = false; // graceful shutdown under way
  let rolling = false; // a rolling restart under way
  let halted = false; // crash loop detected: no respawns until SIGUSR2
  let startupDeaths = []; // timestamps, the sliding window
  const meta = new Map(); // worker.id -> { bornAt, listening, beat, retired, pendingRoll, timer, killed }

  const live = () => Object.values(cluster.workers).filter((w) => !w.isDead());
  const active = () => live().filter((w) => !meta.get(w.id)?.retired);

  const tell = (w, msg) => {
    if (!w.isConnected()) return;
    try { w.send(msg, (err) => err && console.error(`[primary] -> ${w.process.pid}: ${err.code ?? err.message}`)); }
    catch (err) { console.error(`[primary] -> ${w.process.pid}: ${err.code ?? err.message}`); }
  };

  const fork = ({ pendingRoll = false } = {}) => {
    const w = cluster.fork({ CAPSTONE_CONFIG: JSON.stringify(config) }); // starts with the latest config
    meta.set(w.id, { bornAt: Date.now(), listening: false, beat: 0, retired: false, pendingRoll, timer: null, killed: false });
    w.on('error', (err) => console.error(`[primary] worker ${w.process.pid}: ${err.code ?? err.message}`));
    w.on('listening', () => {
      const m = meta.get(w.id);
      if (m) Object.assign(m, { listening: true, beat: Date.now() });
      tell(w, { type: 'config', config }); // in case a broadcast raced its start-up
    });
    w.on('message', (msg) => {
      if (!plainObject(msg)) return;
      const m = meta.get(w.id);
      if (m) m.beat = Date.now();
      switch (msg.type) {
        case 'set-config':
          if (!plainObject(msg.config)) return;
          config = msg.config;
          for (const other of live()) tell(other, { type: 'config', config });
          return;
        case 'counter':
          if (msg.op === 'incr') counter += 1;
          tell(w, { type: 'counter', id: msg.id, value: counter });
          return;
        default:
          return; // 'beat' only refreshes m.beat
      }
    });
    return w;
  };

  const retire = (w) => {
    const m = meta.get(w.id);
    if (!m || m.retired) return;
    m.retired = true;
    tell(w, { type: 'drain' }); // arrives before the disconnect below
    try { if (w.isConnected()) w.disconnect(); } catch (err) { console.error(`[primary] disconnect: ${err.message}`); }
    m.timer = setTimeout(() => { if (!w.isDead()) w.process.kill('SIGKILL'); }, SHUTDOWN_TIMEOUT + 500);
  };

  cluster.on('exit', (w, code, signal) => {
    const m = meta.get(w.id) ?? {};
    meta.delete(w.id);
    clearTimeout(m.timer);
    if (stopping) {
      if (live().length === 0) process.exit(0);
      return;
    }
    if (m.retired) return; // replaced already, on purpose
    const now = Date.now();
    if (now - m.bornAt < 1000) {
      startupDeaths.push(now);
      startupDeaths = startupDeaths.filter((t) => now - t <= 10000);
      if (!halted && startupDeaths.length >= 5) {
        halted = true;
        console.error(`[primary] crash loop: ${startupDeaths.length} workers died within 1 s of start-up in the last 10 s; respawning stopped until SIGUSR2`);
      }
    } else {
      console.log(`[primary] worker ${w.process.pid} exited (${signal ?? code}); forking a replacement`);
    }
    if (m.pendingRoll) return; // the rolling restart owns this one
    if (!halted) fork();
  });

  // Ref'd on purpose: it keeps the primary waiting for SIGUSR2 even with no worker.
  setInterval(() => {
    const now = Date.now();
    for (const w of live()) {
      const m = meta.get(w.id);
      if (!m?.listening || m.killed || !w.isConnected()) continue; // not started yet, or already drained
      if (now - m.beat > HEARTBEAT_TIMEOUT + BEAT_MS) {
        m.killed = true;
        console.error(`[primary] no heartbeat from ${w.process.pid} for ${now - m.beat} ms: SIGKILL`);
        w.process.kill('SIGKILL');
      }
    }
  }, 100);

  const listened = (w) => new Promise((resolve) => {
    const ok = () => { w.off('exit', ko); resolve(true); };
    const ko = () => { w.off('listening', ok); resolve(false); };
    w.once('listening', ok);
    w.once('exit', ko);
  });

  const replacement = async () => {
    while (!stopping && !halted) {
      const w = fork({ pendingRoll: true });
      if (await listened(w)) { const m = meta.get(w.id); if (m) m.pendingRoll = false; return w; }
    }
    return null;
  };

  process.on('SIGUSR2', () => { rollingRestart().catch((err) => console.error('[primary] restart failed:', err)); });
  const rollingRestart = async () => {
    if (stopping) return;
    if (rolling) { console.log('[primary] SIGUSR2 ignored: restart already running'); return; }
    rolling = true;
    halted = false; // the operator fixed the cause
    startupDeaths = [];
    const before = active();
    try {
      while (active().length < WORKERS) if (!(await replacement())) return;
      while (before.some((w) => !w.isDead() && !meta.get(w.id)?.retired)) {
        if (!(await replacement())) return; // next fork only after this one listens
        const old = before.find((w) => !w.isDead() && !meta.get(w.id)?.retired);
        if (old && active().length > WORKERS) retire(old);
      }
      console.log('[primary] rolling restart complete');
    } finally {
      rolling = false;
    }
  };

  const shutdown = (sig) => {
    if (stopping) return;
    stopping = true;
    console.log(`[primary] ${sig}: graceful shutdown`);
    const ws = live();
    if (ws.length === 0) process.exit(0);
    for (const w of ws) {
      if (meta.get(w.id)?.listening) retire(w);
      else w.process.kill('SIGKILL'); // never listened: nothing in flight
    }
  };
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));

  for (let i = 0; i < WORKERS; i++) fork();
} else {
  // The start-up fault: before listening, before anything else.
  if (POISON_FILE && fs.existsSync(POISON_FILE)) throw new Error(`poison file ${POISON_FILE} present`);

  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});

  let config = {};
  try { const c = JSON.parse(env.CAPSTONE_CONFIG ?? '{}'); if (plainObject(c)) config = c; } catch { /* {} */ }
  let draining = false;
  let seq = 0;
  const waiting = new Map();
  const pid = process.pid;

  const toPrimary = (msg, cb = () => {}) => {
    if (!process.connected) return cb(new Error('channel closed'));
    process.send(msg, (err) => cb(err ?? null));
  };

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  const server = http.createServer(app);

  // Checked when the answer is written: a request that arrived before the
  // drain but answers after it still says Connection: close.
  const reply = (res, status, body) => {
    if (res.headersSent) return;
    if (draining || !server.listening) res.set('Connection', 'close');
    res.status(status).json(body);
  };

  const counter = (op) => (req, res) => {
    const id = ++seq;
    const timer = setTimeout(() => { waiting.delete(id); reply(res, 503, { pid, error: 'no answer from primary' }); }, 5000).unref();
    waiting.set(id, (value) => { clearTimeout(timer); reply(res, 200, { pid, count: value }); });
    toPrimary({ type: 'counter', op, id }, (err) => {
      if (err && waiting.delete(id)) { clearTimeout(timer); reply(res, 503, { pid, error: 'no primary' }); }
    });
  };

  process.on('message', (msg) => {
    if (!plainObject(msg)) return;
    if (msg.type === 'config' && plainObject(msg.config)) config = msg.config;
    else if (msg.type === 'counter') { const done = waiting.get(msg.id); if (done) { waiting.delete(msg.id); done(msg.value); } }
    else if (msg.type === 'drain' && !draining) {
      draining = true;
      setTimeout(() => server.closeAllConnections(), SHUTDOWN_TIMEOUT).unref();
    }
  });

  const msOf = (req) => Math.min(Math.max(Number(req.query.ms) || 0, 0), 60000);

  app.get('/', (req, res) => reply(res, 200, { pid }));
  app.get('/heavy', (req, res) => {
    const ms = msOf(req);
    const until = Date.now() + ms;
    while (Date.now() < until) { /* busy on purpose */ }
    reply(res, 200, { pid, ms });
  });
  // From setImmediate, outside express's try/catch: a real uncaught exception.
  app.get('/crash', () => setImmediate(() => { throw new Error('GET /crash'); }));
  app.get('/slow', (req, res) => { const ms = msOf(req); setTimeout(() => reply(res, 200, { pid, ms }), ms); });
  app.get('/hang', () => { for (;;) { /* the event loop never comes back */ } });
  app.get('/config', (req, res) => reply(res, 200, { pid, config }));
  // Any content type: parse it ourselves so a missing header is not a 400.
  app.post('/config', express.text({ type: () => true, limit: '1mb' }), (req, res) => {
    let body;
    try { body = JSON.parse(typeof req.body === 'string' ? req.body : ''); } catch { return reply(res, 400, { pid, error: 'invalid JSON' }); }
    if (!plainObject(body)) return reply(res, 400, { pid, error: 'config must be a JSON object' });
    config = body;
    toPrimary({ type: 'set-config', config: body }, (err) => (err
      ? reply(res, 503, { pid, error: 'primary unreachable' })
      : reply(res, 200, { pid, config: body })));
  });
  app.get('/count', counter('get'));
  app.post('/count', counter('incr'));
  app.use((req, res) => reply(res, 404, { pid, error: 'not found' }));
  app.use((err, req, res, next) => reply(res, err.status || err.statusCode || 500, { pid, error: err.message })); // eslint-disable-line no-unused-vars

  server.listen(PORT, () => {
    toPrimary({ type: 'beat' });
    setInterval(() => toPrimary({ type: 'beat' }), BEAT_MS).unref(); // must not keep a drained worker alive
  });
}
