'use strict';
// blind-r27-mistake-counts-every-death.cjs: a capstone answer (CommonJS,
// node:http, one supervisor closure) with one realistic mistake. The crash-loop
// check counts EVERY unplanned worker death in its 5-in-10-s window, not only
// start-up deaths (within 1 s of the worker's fork): SIGKILLs and crashes of
// workers that had served for a long time count too. Under the chaos schedule
// (at least 6 such kills/crashes within 9 s) the primary declares a crash loop
// and stops replacing killed workers. Workers retired on purpose are not counted.
// Everything else follows the contract.
// expect: fail at chaos
// expect-text: replace

const cluster = require('node:cluster');
const http = require('node:http');
const fs = require('node:fs');
const os = require('node:os');

const num = (v, d) => (Number(v) > 0 ? Number(v) : d);
const PORT = num(process.env.PORT, 3000);
const WORKERS = num(process.env.WORKERS, os.availableParallelism());
const HEARTBEAT_TIMEOUT = num(process.env.HEARTBEAT_TIMEOUT, 3000);
const SHUTDOWN_TIMEOUT = num(process.env.SHUTDOWN_TIMEOUT, 10000);
const POISON_FILE = process.env.POISON_FILE;
const BEAT = Math.max(50, Math.floor(HEARTBEAT_TIMEOUT / 5));
const objectish = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

function supervisor() {
  let config = {};
  let total = 0;
  let down = false; // shutting down
  let busy = false; // restart running
  let paused = false; // crash loop: no respawn
  let recent = []; // death timestamps (the mistake: every death goes in)
  const w8 = new WeakMap(); // Worker -> bookkeeping

  const running = () => Object.values(cluster.workers).filter((w) => !w.isDead());
  const current = () => running().filter((w) => !w8.get(w)?.retiring);

  function push(w, msg) {
    if (!w.isConnected()) return;
    try { w.send(msg, (e) => { if (e) console.error(`[primary] send to ${w.process.pid}: ${e.code || e.message}`); }); }
    catch (e) { console.error(`[primary] send to ${w.process.pid}: ${e.code || e.message}`); }
  }

  function add(restartOwned) {
    const w = cluster.fork({ CFG_JSON: JSON.stringify(config) });
    w8.set(w, { forked: Date.now(), up: false, heard: 0, retiring: false, restartOwned, killAt: null, shot: false });
    w.on('error', (e) => console.error(`[primary] worker ${w.process.pid}: ${e.code || e.message}`));
    w.on('listening', () => {
      const s = w8.get(w);
      s.up = true;
      s.heard = Date.now();
      push(w, { op: 'config', config });
    });
    w.on('message', (m) => {
      if (!objectish(m)) return;
      w8.get(w).heard = Date.now();
      if (m.op === 'set-config' && objectish(m.config)) {
        config = m.config;
        running().forEach((o) => push(o, { op: 'config', config }));
      } else if (m.op === 'count') {
        if (m.incr) total += 1;
        push(w, { op: 'count-result', id: m.id, count: total });
      }
    });
    return w;
  }

  function retire(w) {
    const s = w8.get(w);
    if (!s || s.retiring) return;
    s.retiring = true;
    push(w, { op: 'stop' });
    try { if (w.isConnected()) w.disconnect(); } catch (e) { console.error(e.message); }
    s.killAt = setTimeout(() => { if (!w.isDead()) w.process.kill('SIGKILL'); }, SHUTDOWN_TIMEOUT + 500);
  }

  cluster.on('exit', (w, code, signal) => {
    const s = w8.get(w) || {};
    clearTimeout(s.killAt);
    if (down) { if (running().length === 0) process.exit(0); return; }
    if (s.retiring) return;
    const now = Date.now();
    // The mistake: no "within 1 s of its fork" test; any death is a crash-loop death.
    recent = recent.filter((t) => now - t <= 10000);
    recent.push(now);
    console.log(`[primary] worker ${w.process.pid} died (${signal || code}), ${recent.length} deaths in 10 s`);
    if (recent.length >= 5 && !paused) {
      paused = true;
      console.error('[primary] crash loop: 5 worker deaths within 10 s, respawning stopped until SIGUSR2');
    }
    if (s.restartOwned && !s.up) return;
    if (!paused) add(false);
  });

  setInterval(() => {
    const now = Date.now();
    for (const w of running()) {
      const s = w8.get(w);
      if (!s || !s.up || s.shot || !w.isConnected()) continue;
      if (now - s.heard > HEARTBEAT_TIMEOUT + BEAT) {
        s.shot = true;
        console.error(`[primary] worker ${w.process.pid} stopped beating: SIGKILL`);
        w.process.kill('SIGKILL');
      }
    }
  }, 100);

  const listens = (w) => new Promise((resolve) => {
    const a = () => { w.off('exit', b); resolve(true); };
    const b = () => { w.off('listening', a); resolve(false); };
    w.once('listening', a);
    w.once('exit', b);
  });

  async function one() {
    while (!down && !paused) {
      const w = add(true);
      if (await listens(w)) { w8.get(w).restartOwned = false; return w; }
    }
    return null;
  }

  async function restart() {
    if (down) return;
    if (busy) { console.log('[primary] SIGUSR2 ignored, restart in progress'); return; }
    busy = true;
    paused = false;
    recent = [];
    const before = current();
    const oldLeft = () => before.find((w) => !w.isDead() && !w8.get(w)?.retiring);
    try {
      while (current().length < WORKERS) if (!(await one())) return;
      while (oldLeft()) {
        if (!(await one())) return;
        const w = oldLeft();
        if (w && current().length > WORKERS) retire(w);
      }
    } finally {
      busy = false;
    }
  }

  function stop(sig) {
    if (down) return;
    down = true;
    console.log(`[primary] ${sig}: stopping`);
    const ws = running();
    if (!ws.length) process.exit(0);
    for (const w of ws) { if (w8.get(w)?.up) retire(w); else w.process.kill('SIGKILL'); }
  }

  process.on('SIGTERM', () => stop('SIGTERM'));
  process.on('SIGINT', () => stop('SIGINT'));
  process.on('SIGUSR2', () => { restart().catch((e) => console.error(e)); });
  for (let i = 0; i < WORKERS; i++) add(false);
}

function serve() {
  if (POISON_FILE && fs.existsSync(POISON_FILE)) throw new Error('POISON_FILE exists');
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});

  const pid = process.pid;
  let config = {};
  try { const c = JSON.parse(process.env.CFG_JSON || '{}'); if (objectish(c)) config = c; } catch { /* {} */ }
  let closing = false;
  let n = 0;
  const calls = new Map();

  function ipc(msg, cb) {
    if (!process.connected) { if (cb) cb(new Error('IPC closed')); return; }
    process.send(msg, (e) => { if (cb) cb(e || null); });
  }

  function out(res, status, obj) {
    if (res.headersSent) return;
    if (closing || !server.listening) res.setHeader('Connection', 'close');
    const b = JSON.stringify(obj);
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(b) });
    res.end(b);
  }

  function count(incr, res) {
    const id = ++n;
    const t = setTimeout(() => { calls.delete(id); out(res, 503, { pid, error: 'timeout' }); }, 5000);
    t.unref();
    calls.set(id, (v) => { clearTimeout(t); out(res, 200, { pid, count: v }); });
    ipc({ op: 'count', incr, id }, (e) => { if (e && calls.delete(id)) { clearTimeout(t); out(res, 503, { pid, error: 'no primary' }); } });
  }

  process.on('message', (m) => {
    if (!objectish(m)) return;
    if (m.op === 'config' && objectish(m.config)) config = m.config;
    else if (m.op === 'count-result' && calls.has(m.id)) { const f = calls.get(m.id); calls.delete(m.id); f(m.count); }
    else if (m.op === 'stop' && !closing) {
      closing = true;
      setTimeout(() => server.closeAllConnections(), SHUTDOWN_TIMEOUT).unref();
    }
  });

  const server = http.createServer((req, res) => {
    let u;
    try { u = new URL(req.url, 'http://h'); } catch { out(res, 400, { pid, error: 'bad url' }); return; }
    const ms = Math.min(Math.max(Number(u.searchParams.get('ms')) || 0, 0), 60000);
    const route = `${req.method} ${u.pathname}`;
    if (route === 'GET /') out(res, 200, { pid });
    else if (route === 'GET /heavy') { const end = Date.now() + ms; while (Date.now() < end); out(res, 200, { pid, ms }); }
    else if (route === 'GET /crash') setImmediate(() => { throw new Error('crash'); });
    else if (route === 'GET /slow') setTimeout(() => out(res, 200, { pid, ms }), ms);
    else if (route === 'GET /hang') for (;;);
    else if (route === 'GET /config') out(res, 200, { pid, config });
    else if (route === 'GET /count') { req.resume(); count(false, res); }
    else if (route === 'POST /count') { req.resume(); count(true, res); }
    else if (route === 'POST /config') {
      const parts = [];
      req.on('data', (c) => parts.push(c));
      req.on('end', () => {
        let body;
        try { body = JSON.parse(Buffer.concat(parts).toString()); } catch { out(res, 400, { pid, error: 'invalid JSON' }); return; }
        if (!objectish(body)) { out(res, 400, { pid, error: 'not an object' }); return; }
        config = body;
        ipc({ op: 'set-config', config: body }, (e) => out(res, e ? 503 : 200, e ? { pid, error: 'no primary' } : { pid, config: body }));
      });
    } else out(res, 404, { pid, error: 'not found' });
  });

  server.listen(PORT, () => {
    ipc({ op: 'beat' });
    setInterval(() => ipc({ op: 'beat' }), BEAT).unref();
  });
}

if (cluster.isPrimary) supervisor();
else serve();
