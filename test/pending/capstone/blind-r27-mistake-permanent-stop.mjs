// blind-r27-mistake-permanent-stop.mjs: a capstone answer (ES module,
// node:http, a small class for the primary) with one realistic mistake. Once
// the crash-loop protection trips, the primary never respawns again: SIGUSR2
// neither forgets the counted deaths nor forks the missing workers; it only
// rolls the workers it still has, like for like. After the crash loop the
// cluster therefore settles at 2 workers, not WORKERS=3. Everything else
// follows the contract.
// expect: fail at crash-loop-contained

import cluster from 'node:cluster';
import http from 'node:http';
import { existsSync } from 'node:fs';
import { availableParallelism } from 'node:os';

const PORT = Number(process.env.PORT) || 3000;
const WORKERS = Number(process.env.WORKERS) || availableParallelism();
const HEARTBEAT_TIMEOUT = Number(process.env.HEARTBEAT_TIMEOUT) || 3000;
const SHUTDOWN_TIMEOUT = Number(process.env.SHUTDOWN_TIMEOUT) || 10000;
const { POISON_FILE } = process.env;
const BEAT = Math.max(50, Math.floor(HEARTBEAT_TIMEOUT / 5));
const isRecord = (v) => typeof v === 'object' && v !== null && !Array.isArray(v);

class Primary {
  config = {};
  count = 0;
  closing = false;
  rolling = false;
  gaveUp = false; // crash loop seen: a human has to restart the whole service (the mistake)
  crashes = []; // start-up death timestamps
  book = new Map();

  start() {
    process.on('SIGTERM', () => this.shutdown('SIGTERM'));
    process.on('SIGINT', () => this.shutdown('SIGINT'));
    process.on('SIGUSR2', () => this.roll().catch((e) => console.error('[primary] restart:', e)));
    cluster.on('exit', (w, code, signal) => this.onExit(w, code, signal));
    setInterval(() => this.checkBeats(), 100); // ref'd: keeps the primary up with zero workers
    for (let i = 0; i < WORKERS; i++) this.fork();
  }

  alive() { return Object.values(cluster.workers).filter((w) => !w.isDead()); }
  serving() { return this.alive().filter((w) => !this.book.get(w.id)?.retiring); }

  send(w, msg) {
    if (!w.isConnected()) return;
    try { w.send(msg, (err) => err && console.error(`[primary] send: ${err.code ?? err.message}`)); }
    catch (err) { console.error(`[primary] send: ${err.code ?? err.message}`); }
  }

  fork(byRestart = false) {
    const w = cluster.fork({ SHARED_CONFIG: JSON.stringify(this.config) });
    this.book.set(w.id, { forkedAt: Date.now(), listening: false, seen: 0, retiring: false, byRestart, timer: null, killed: false });
    w.on('error', (err) => console.error(`[primary] worker ${w.process.pid}: ${err.code ?? err.message}`));
    w.on('listening', () => {
      const b = this.book.get(w.id);
      if (b) { b.listening = true; b.seen = Date.now(); }
      this.send(w, { t: 'config', config: this.config });
    });
    w.on('message', (msg) => this.onMessage(w, msg));
    return w;
  }

  onMessage(w, msg) {
    if (!isRecord(msg)) return;
    const b = this.book.get(w.id);
    if (b) b.seen = Date.now();
    if (msg.t === 'setConfig' && isRecord(msg.config)) {
      this.config = msg.config;
      for (const o of this.alive()) this.send(o, { t: 'config', config: this.config });
    } else if (msg.t === 'count') {
      if (msg.op === 'incr') this.count++;
      this.send(w, { t: 'countReply', id: msg.id, count: this.count });
    }
  }

  retire(w) {
    const b = this.book.get(w.id);
    if (!b || b.retiring) return;
    b.retiring = true;
    this.send(w, { t: 'stop' });
    try { if (w.isConnected()) w.disconnect(); } catch (err) { console.error(err.message); }
    b.timer = setTimeout(() => { if (!w.isDead()) w.process.kill('SIGKILL'); }, SHUTDOWN_TIMEOUT + 500);
  }

  onExit(w, code, signal) {
    const b = this.book.get(w.id) ?? {};
    this.book.delete(w.id);
    clearTimeout(b.timer);
    if (this.closing) {
      if (this.alive().length === 0) process.exit(0);
      return;
    }
    if (b.retiring) return;
    const now = Date.now();
    if (now - b.forkedAt < 1000) {
      this.crashes = [...this.crashes.filter((t) => now - t <= 10000), now];
      if (this.crashes.length >= 5 && !this.gaveUp) {
        this.gaveUp = true;
        console.error('[primary] crash loop: 5 workers died at start-up within 10 s; respawning disabled for good');
      }
    } else {
      console.log(`[primary] worker ${w.process.pid} died (${signal ?? code})`);
    }
    if (b.byRestart && !b.listening) return;
    if (!this.gaveUp) this.fork();
  }

  checkBeats() {
    const now = Date.now();
    for (const w of this.alive()) {
      const b = this.book.get(w.id);
      if (!b?.listening || b.killed || !w.isConnected()) continue;
      if (now - b.seen > HEARTBEAT_TIMEOUT + BEAT) {
        b.killed = true;
        console.error(`[primary] ${w.process.pid} missed its heartbeats: SIGKILL`);
        w.process.kill('SIGKILL');
      }
    }
  }

  whenListening(w) {
    return new Promise((resolve) => {
      const ok = () => { w.off('exit', bad); resolve(true); };
      const bad = () => { w.off('listening', ok); resolve(false); };
      w.once('listening', ok);
      w.once('exit', bad);
    });
  }

  async replacement() {
    for (let attempt = 0; attempt < 3 && !this.closing; attempt++) {
      const w = this.fork(true);
      if (await this.whenListening(w)) { const b = this.book.get(w.id); if (b) b.byRestart = false; return w; }
    }
    return null;
  }

  // The mistake: no reset of gaveUp / crashes and no "fork the missing ones";
  // the restart swaps each worker it still has for a new one, and that is all.
  async roll() {
    if (this.closing) return;
    if (this.rolling) { console.log('[primary] SIGUSR2 ignored: a restart is running'); return; }
    this.rolling = true;
    const old = this.serving();
    const next = () => old.find((w) => !w.isDead() && !this.book.get(w.id)?.retiring);
    try {
      const target = old.length;
      while (next()) {
        if (!(await this.replacement())) return;
        const w = next();
        if (w && this.serving().length > target) this.retire(w);
      }
      console.log(`[primary] restart done with ${this.serving().length} workers`);
    } finally {
      this.rolling = false;
    }
  }

  shutdown(sig) {
    if (this.closing) return;
    this.closing = true;
    console.log(`[primary] ${sig}: draining`);
    const ws = this.alive();
    if (ws.length === 0) process.exit(0);
    for (const w of ws) {
      if (this.book.get(w.id)?.listening) this.retire(w);
      else w.process.kill('SIGKILL');
    }
  }
}

function worker() {
  if (POISON_FILE && existsSync(POISON_FILE)) throw new Error(`refusing to start: ${POISON_FILE} exists`);
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});

  const pid = process.pid;
  let config = {};
  try { const c = JSON.parse(process.env.SHARED_CONFIG ?? '{}'); if (isRecord(c)) config = c; } catch { /* {} */ }
  let leaving = false;
  let nextId = 1;
  const inflight = new Map();

  const up = (msg, cb = () => {}) => {
    if (!process.connected) { cb(new Error('no IPC')); return; }
    process.send(msg, (err) => cb(err ?? null));
  };

  const respond = (res, status, body) => {
    if (res.headersSent) return;
    if (leaving || !server.listening) res.setHeader('Connection', 'close');
    const s = JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(s) });
    res.end(s);
  };

  const counter = (op, res) => {
    const id = nextId++;
    const timer = setTimeout(() => { inflight.delete(id); respond(res, 503, { pid, error: 'timeout' }); }, 5000).unref();
    inflight.set(id, (count) => { clearTimeout(timer); respond(res, 200, { pid, count }); });
    up({ t: 'count', op, id }, (err) => { if (err && inflight.delete(id)) { clearTimeout(timer); respond(res, 503, { pid, error: 'no primary' }); } });
  };

  process.on('message', (msg) => {
    if (!isRecord(msg)) return;
    if (msg.t === 'config' && isRecord(msg.config)) config = msg.config;
    else if (msg.t === 'countReply') { const f = inflight.get(msg.id); if (f) { inflight.delete(msg.id); f(msg.count); } }
    else if (msg.t === 'stop' && !leaving) {
      leaving = true;
      setTimeout(() => server.closeAllConnections(), SHUTDOWN_TIMEOUT).unref();
    }
  });

  const server = http.createServer(async (req, res) => {
    let url;
    try { url = new URL(req.url, 'http://127.0.0.1'); } catch { respond(res, 400, { pid, error: 'bad url' }); return; }
    const ms = Math.min(Math.max(Number(url.searchParams.get('ms')) || 0, 0), 60000);
    const key = `${req.method} ${url.pathname}`;
    if (key === 'GET /') return respond(res, 200, { pid });
    if (key === 'GET /heavy') { const end = Date.now() + ms; while (Date.now() < end); return respond(res, 200, { pid, ms }); }
    if (key === 'GET /crash') { setImmediate(() => { throw new Error('requested crash'); }); return undefined; }
    if (key === 'GET /slow') { setTimeout(() => respond(res, 200, { pid, ms }), ms); return undefined; }
    if (key === 'GET /hang') { for (;;); }
    if (key === 'GET /config') return respond(res, 200, { pid, config });
    if (key === 'GET /count' || key === 'POST /count') { req.resume(); return counter(req.method === 'POST' ? 'incr' : 'get', res); }
    if (key === 'POST /config') {
      const chunks = [];
      try { for await (const c of req) chunks.push(c); } catch { return undefined; }
      let body;
      try { body = JSON.parse(Buffer.concat(chunks).toString('utf8')); } catch { return respond(res, 400, { pid, error: 'invalid JSON' }); }
      if (!isRecord(body)) return respond(res, 400, { pid, error: 'config must be an object' });
      config = body;
      return up({ t: 'setConfig', config: body }, (err) => respond(res, err ? 503 : 200, err ? { pid, error: 'no primary' } : { pid, config: body }));
    }
    return respond(res, 404, { pid, error: 'not found' });
  });

  server.listen(PORT, () => {
    up({ t: 'beat' });
    setInterval(() => up({ t: 'beat' }), BEAT).unref();
  });
}

if (cluster.isPrimary) new Primary().start();
else worker();
