'use strict';
// blind-r27-mistake-window-from-primary-start.cjs: a capstone answer (CommonJS,
// node:http) with one realistic mistake. Whether a death is a "start-up death"
// is measured from the PRIMARY's start time (STARTED_AT), not from the fork
// time of the worker that died. Only deaths in the primary's first second
// count, so the poisoned workers of the crash loop (minutes later) are never
// counted and the primary forks forever while POISON_FILE exists. Everything
// else follows the contract.
// expect: fail at crash-loop-contained

const cluster = require('node:cluster');
const http = require('node:http');
const fs = require('node:fs');
const os = require('node:os');

const STARTED_AT = Date.now(); // used for the uptime in logs... and, wrongly, below
const cfg = {
  port: Number(process.env.PORT) || 3000,
  workers: Number(process.env.WORKERS) || os.availableParallelism(),
  heartbeatTimeout: Number(process.env.HEARTBEAT_TIMEOUT) || 3000,
  shutdownTimeout: Number(process.env.SHUTDOWN_TIMEOUT) || 10000,
  poisonFile: process.env.POISON_FILE,
};
const beatEvery = Math.max(50, Math.floor(cfg.heartbeatTimeout / 5));
const isObj = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);
const uptime = () => `${((Date.now() - STARTED_AT) / 1000).toFixed(1)}s`;

if (cluster.isPrimary) {
  const pool = {
    config: {},
    count: 0,
    closing: false,
    restarting: false,
    stopped: false, // crash-loop stop
    deaths: [], // start-up death timestamps (sliding 10 s window)
    info: new Map(),
  };

  const alive = () => Object.values(cluster.workers).filter((w) => !w.isDead());
  const serving = () => alive().filter((w) => !pool.info.get(w.id)?.retiring);

  function post(w, msg) {
    if (!w.isConnected()) return;
    try { w.send(msg, (err) => { if (err) console.error(`[primary ${uptime()}] send failed: ${err.code || err.message}`); }); }
    catch (err) { console.error(`[primary ${uptime()}] send threw: ${err.code || err.message}`); }
  }

  function spawn(owner) {
    const w = cluster.fork({ APP_CONFIG: JSON.stringify(pool.config) });
    pool.info.set(w.id, { forkedAt: Date.now(), listening: false, lastSeen: 0, retiring: false, owner, killTimer: null, killed: false });
    w.on('error', (err) => console.error(`[primary ${uptime()}] worker error: ${err.code || err.message}`));
    w.on('listening', () => {
      const i = pool.info.get(w.id);
      if (i) { i.listening = true; i.lastSeen = Date.now(); }
      post(w, { kind: 'config', config: pool.config });
    });
    w.on('message', (msg) => {
      if (!isObj(msg)) return;
      const i = pool.info.get(w.id);
      if (i) i.lastSeen = Date.now();
      if (msg.kind === 'config:set' && isObj(msg.config)) {
        pool.config = msg.config;
        alive().forEach((o) => post(o, { kind: 'config', config: pool.config }));
      } else if (msg.kind === 'count') {
        if (msg.op === 'incr') pool.count += 1;
        post(w, { kind: 'count:reply', id: msg.id, count: pool.count });
      }
    });
    return w;
  }

  function retire(w) {
    const i = pool.info.get(w.id);
    if (!i || i.retiring) return;
    i.retiring = true;
    post(w, { kind: 'stop' });
    try { if (w.isConnected()) w.disconnect(); } catch (err) { console.error(err.message); }
    i.killTimer = setTimeout(() => { if (!w.isDead()) w.process.kill('SIGKILL'); }, cfg.shutdownTimeout + 500);
  }

  cluster.on('exit', (w, code, signal) => {
    const i = pool.info.get(w.id) || {};
    pool.info.delete(w.id);
    clearTimeout(i.killTimer);
    if (pool.closing) {
      if (alive().length === 0) process.exit(0);
      return;
    }
    if (i.retiring) return;
    const now = Date.now();
    // BUG: "within 1 s of start" taken from the primary's start, not i.forkedAt.
    if (now - STARTED_AT < 1000) {
      pool.deaths.push(now);
      pool.deaths = pool.deaths.filter((t) => now - t <= 10000);
      if (pool.deaths.length >= 5 && !pool.stopped) {
        pool.stopped = true;
        console.error(`[primary ${uptime()}] crash loop: 5 start-up deaths within 10 s, not respawning until SIGUSR2`);
      }
    }
    console.log(`[primary ${uptime()}] worker ${w.process.pid} exited (${signal || code})`);
    if (i.owner === 'restart' && !i.listening) return; // the restart handles its own replacement
    if (!pool.stopped) spawn('respawn');
  });

  setInterval(() => {
    const now = Date.now();
    for (const w of alive()) {
      const i = pool.info.get(w.id);
      if (!i || !i.listening || i.killed || !w.isConnected()) continue;
      if (now - i.lastSeen > cfg.heartbeatTimeout + beatEvery) {
        i.killed = true;
        console.error(`[primary ${uptime()}] worker ${w.process.pid} unresponsive: SIGKILL`);
        w.process.kill('SIGKILL');
      }
    }
  }, 100);

  function untilListening(w) {
    return new Promise((resolve) => {
      const yes = () => { w.removeListener('exit', no); resolve(true); };
      const no = () => { w.removeListener('listening', yes); resolve(false); };
      w.once('listening', yes);
      w.once('exit', no);
    });
  }

  async function freshWorker() {
    while (!pool.closing && !pool.stopped) {
      const w = spawn('restart');
      if (await untilListening(w)) { const i = pool.info.get(w.id); if (i) i.owner = 'respawn'; return w; }
    }
    return null;
  }

  async function roll() {
    if (pool.closing) return;
    if (pool.restarting) { console.log(`[primary ${uptime()}] SIGUSR2 ignored (restart running)`); return; }
    pool.restarting = true;
    pool.stopped = false;
    pool.deaths = [];
    const olds = serving();
    try {
      while (serving().length < cfg.workers) { if (!(await freshWorker())) return; }
      const pendingOld = () => olds.find((w) => !w.isDead() && !pool.info.get(w.id)?.retiring);
      while (pendingOld()) {
        if (!(await freshWorker())) return;
        const old = pendingOld();
        if (old && serving().length > cfg.workers) retire(old);
      }
    } finally {
      pool.restarting = false;
    }
  }

  function shutdown(sig) {
    if (pool.closing) return;
    pool.closing = true;
    console.log(`[primary ${uptime()}] ${sig}: shutting down`);
    const ws = alive();
    if (ws.length === 0) process.exit(0);
    ws.forEach((w) => (pool.info.get(w.id)?.listening ? retire(w) : w.process.kill('SIGKILL')));
  }

  process.on('SIGUSR2', () => { roll().catch((e) => console.error(e)); });
  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  for (let n = 0; n < cfg.workers; n++) spawn('respawn');
} else {
  if (cfg.poisonFile && fs.existsSync(cfg.poisonFile)) throw new Error('poison file present, cannot start');
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});

  const pid = process.pid;
  let config = {};
  try { const c = JSON.parse(process.env.APP_CONFIG || '{}'); if (isObj(c)) config = c; } catch { /* {} */ }
  let leaving = false;
  let ids = 0;
  const replies = new Map();

  const up = (msg, cb) => {
    if (!process.connected) return cb && cb(new Error('disconnected'));
    process.send(msg, (err) => cb && cb(err || null));
    return undefined;
  };

  function json(res, status, body) {
    if (res.headersSent) return;
    if (leaving || !server.listening) res.setHeader('Connection', 'close');
    const text = JSON.stringify(body);
    res.writeHead(status, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) });
    res.end(text);
  }

  function count(op, res) {
    const id = ++ids;
    const t = setTimeout(() => { replies.delete(id); json(res, 503, { pid, error: 'timeout' }); }, 5000);
    t.unref();
    replies.set(id, (n) => { clearTimeout(t); json(res, 200, { pid, count: n }); });
    up({ kind: 'count', op, id }, (err) => { if (err && replies.delete(id)) { clearTimeout(t); json(res, 503, { pid, error: 'no primary' }); } });
  }

  process.on('message', (msg) => {
    if (!isObj(msg)) return;
    if (msg.kind === 'config' && isObj(msg.config)) config = msg.config;
    if (msg.kind === 'count:reply') { const r = replies.get(msg.id); if (r) { replies.delete(msg.id); r(msg.count); } }
    if (msg.kind === 'stop' && !leaving) {
      leaving = true;
      setTimeout(() => server.closeAllConnections(), cfg.shutdownTimeout).unref();
    }
  });

  const routes = {
    'GET /': (req, res) => json(res, 200, { pid }),
    'GET /heavy': (req, res, ms) => { const end = Date.now() + ms; while (Date.now() < end); json(res, 200, { pid, ms }); },
    'GET /crash': () => setImmediate(() => { throw new Error('crash on request'); }),
    'GET /slow': (req, res, ms) => setTimeout(() => json(res, 200, { pid, ms }), ms),
    'GET /hang': () => { for (;;); },
    'GET /config': (req, res) => json(res, 200, { pid, config }),
    'GET /count': (req, res) => { req.resume(); count('get', res); },
    'POST /count': (req, res) => { req.resume(); count('incr', res); },
    'POST /config': (req, res) => {
      let raw = '';
      req.setEncoding('utf8');
      req.on('data', (c) => { raw += c; });
      req.on('end', () => {
        let body;
        try { body = JSON.parse(raw); } catch { json(res, 400, { pid, error: 'invalid JSON' }); return; }
        if (!isObj(body)) { json(res, 400, { pid, error: 'not a JSON object' }); return; }
        config = body;
        up({ kind: 'config:set', config: body }, (err) => json(res, err ? 503 : 200, err ? { pid, error: 'no primary' } : { pid, config: body }));
      });
    },
  };

  const server = http.createServer((req, res) => {
    let url;
    try { url = new URL(req.url, 'http://x'); } catch { json(res, 400, { pid, error: 'bad url' }); return; }
    const handler = routes[`${req.method} ${url.pathname}`];
    if (!handler) { json(res, 404, { pid, error: 'not found' }); return; }
    handler(req, res, Math.min(Math.max(Number(url.searchParams.get('ms')) || 0, 0), 60000));
  });

  server.listen(cfg.port, () => {
    up({ kind: 'beat' });
    setInterval(() => up({ kind: 'beat' }), beatEvery).unref();
  });
}
