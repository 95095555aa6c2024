'use strict';
// blind-r27-ok-cjs-http.cjs: a correct answer to the capstone, in CommonJS on
// plain node:http. Crash-loop accounting is per worker: a death counts as a
// start-up death when that worker never listened AND was forked less than 1 s
// ago; counted deaths go into a 10 s counter that SIGUSR2 resets.
// expect: fail at shutdown-clean
// expect-text: was still running after the primary exited
// (authored as a pass; the author counted live workers in cluster.workers, which
// disconnect() empties at once, so the primary exits at the first worker exit:
// the mistake lesson graceful-shutdown names. The verdict was right.)

const cluster = require('node:cluster');
const http = require('node:http');
const fs = require('node:fs');
const os = require('node:os');

const PORT = Number(process.env.PORT) || 3000;
const WORKERS = Number(process.env.WORKERS) || os.availableParallelism();
const HEARTBEAT_TIMEOUT = Number(process.env.HEARTBEAT_TIMEOUT) || 3000;
const SHUTDOWN_TIMEOUT = Number(process.env.SHUTDOWN_TIMEOUT) || 10000;
const POISON_FILE = process.env.POISON_FILE;

const BEAT_EVERY = Math.max(50, Math.floor(HEARTBEAT_TIMEOUT / 5)); // several beats per timeout
const STARTUP_MS = 1000; // a death this soon after fork is a start-up death
const LOOP_WINDOW_MS = 10000;
const LOOP_LIMIT = 5;

const isObject = (v) => v !== null && typeof v === 'object' && !Array.isArray(v);

if (cluster.isPrimary) runPrimary();
else runWorker();

function runPrimary() {
  let config = {};
  let count = 0; // the one cluster-wide counter: it lives here, never in a worker
  let shuttingDown = false;
  let restarting = false;
  let respawnStopped = false;
  let loopDeaths = 0; // start-up deaths counted in the current window
  let loopWindowStart = 0;
  const state = new Map(); // worker.id -> what the primary knows about it

  const alive = () => Object.values(cluster.workers).filter((w) => !w.isDead());
  const serving = () => alive().filter((w) => !state.get(w.id)?.retiring);

  // A worker may die between our check and the write: the callback (and the
  // 'error' listener on every worker) keep the primary alive.
  function safeSend(w, msg) {
    if (!w.isConnected()) return;
    try {
      w.send(msg, (err) => {
        if (err) console.error(`[primary] send to ${w.process.pid} failed: ${err.code || err.message}`);
      });
    } catch (err) {
      console.error(`[primary] send to ${w.process.pid} threw: ${err.code || err.message}`);
    }
  }

  function spawn(forRestart = false) {
    // The latest config goes in the environment, so a new worker starts with it.
    const w = cluster.fork({ CLUSTER_CONFIG: JSON.stringify(config) });
    state.set(w.id, { forkedAt: Date.now(), listened: false, lastBeat: 0, retiring: false, forRestart, killTimer: null, hbKilled: false });
    w.on('error', (err) => console.error(`[primary] worker ${w.process.pid} error: ${err.code || err.message}`));
    w.on('message', (msg) => onMessage(w, msg));
    w.on('listening', () => {
      const s = state.get(w.id);
      if (s) { s.listened = true; s.lastBeat = Date.now(); }
      // A config posted while it was starting may have reached it before it had a listener.
      safeSend(w, { type: 'config', config });
    });
    return w;
  }

  function onMessage(w, msg) {
    if (!isObject(msg)) return;
    const s = state.get(w.id);
    if (s) s.lastBeat = Date.now(); // any message proves its event loop runs
    if (msg.type === 'config-set' && isObject(msg.config)) {
      config = msg.config;
      for (const other of alive()) safeSend(other, { type: 'config', config });
    } else if (msg.type === 'count') {
      if (msg.op === 'incr') count += 1;
      safeSend(w, { type: 'count-reply', id: msg.id, count });
    }
  }

  function retire(w) {
    const s = state.get(w.id);
    if (!s || s.retiring) return;
    s.retiring = true;
    // Tell it first (messages arrive in order) so it starts its own time limit
    // and says Connection: close; then disconnect() closes its server.
    safeSend(w, { type: 'stop' });
    try { if (w.isConnected()) w.disconnect(); } catch (err) { console.error(`[primary] disconnect: ${err.message}`); }
    s.killTimer = setTimeout(() => {
      if (!w.isDead()) { console.error(`[primary] worker ${w.process.pid} still alive after the time limit: SIGKILL`); w.process.kill('SIGKILL'); }
    }, SHUTDOWN_TIMEOUT + 500);
  }

  cluster.on('exit', (w, code, signal) => {
    const s = state.get(w.id) || {};
    state.delete(w.id);
    clearTimeout(s.killTimer);
    if (shuttingDown) {
      if (alive().length === 0) { console.log('[primary] all workers gone, exiting 0'); process.exit(0); }
      return;
    }
    if (s.retiring) return; // retired on purpose: its replacement already runs
    const now = Date.now();
    // The per-worker rule: it never got to listen, and it died within 1 s of its fork.
    if (!s.listened && now - s.forkedAt < STARTUP_MS) {
      if (loopWindowStart === 0 || now - loopWindowStart > LOOP_WINDOW_MS) { loopWindowStart = now; loopDeaths = 0; }
      loopDeaths += 1;
      if (loopDeaths >= LOOP_LIMIT && !respawnStopped) {
        respawnStopped = true;
        console.error(`[primary] crash loop: ${loopDeaths} workers died at start-up within ${now - loopWindowStart} ms; no more respawns until SIGUSR2`);
      }
    } else {
      console.log(`[primary] worker ${w.process.pid} died (${signal || code}), replacing it`);
    }
    if (s.forRestart && !s.listened) return; // the rolling restart retries or gives up itself
    if (respawnStopped) return;
    spawn();
  });

  // Heartbeat check. Kept ref'd on purpose: with every worker dead after a
  // crash loop, it keeps the primary alive, waiting for SIGUSR2.
  let lastTick = Date.now();
  setInterval(() => {
    const now = Date.now();
    const late = now - lastTick > 500; // the primary itself was stalled: its view of beats is stale
    lastTick = now;
    if (late) return;
    for (const w of alive()) {
      const s = state.get(w.id);
      if (!s || !s.listened || s.hbKilled || !w.isConnected()) continue;
      if (now - s.lastBeat > HEARTBEAT_TIMEOUT + BEAT_EVERY) {
        s.hbKilled = true;
        console.error(`[primary] worker ${w.process.pid} silent for ${now - s.lastBeat} ms: SIGKILL`);
        w.process.kill('SIGKILL');
      }
    }
  }, 100);

  function waitListening(w) {
    return new Promise((resolve) => {
      const onListen = () => { w.off('exit', onExit); resolve(true); };
      const onExit = () => { w.off('listening', onListen); resolve(false); };
      w.once('listening', onListen);
      w.once('exit', onExit);
    });
  }

  // Fork one replacement and wait until it listens. If it dies first, try again,
  // unless the crash-loop protection tripped meanwhile or we are shutting down.
  async function startOne() {
    for (;;) {
      if (shuttingDown || respawnStopped) return null;
      const w = spawn(true);
      if (await waitListening(w)) { const s = state.get(w.id); if (s) s.forRestart = false; return w; }
    }
  }

  async function rollingRestart() {
    if (shuttingDown) return;
    if (restarting) { console.log('[primary] SIGUSR2 ignored: a rolling restart is already running'); return; }
    restarting = true;
    // The operator says the cause is fixed: forget the counted deaths, allow respawns.
    if (respawnStopped) console.log('[primary] SIGUSR2: leaving the crash-loop stop, forking again');
    respawnStopped = false;
    loopDeaths = 0;
    loopWindowStart = 0;
    const old = serving();
    try {
      while (serving().length < WORKERS) { if (!(await startOne())) return; } // the missing ones first
      for (;;) {
        const target = old.find((w) => !w.isDead() && !state.get(w.id)?.retiring);
        if (!target) break;
        const fresh = await startOne(); // one at a time: the next fork waits for this 'listening'
        if (!fresh) return;
        // An old worker that died meanwhile was respawned by the exit handler:
        // retire one only while we are above WORKERS.
        const next = old.find((w) => !w.isDead() && !state.get(w.id)?.retiring);
        if (next && serving().length > WORKERS) retire(next);
      }
      console.log(`[primary] rolling restart done: ${serving().map((w) => w.process.pid).join(', ')}`);
    } finally {
      restarting = false;
    }
  }

  function shutdown(sig) {
    if (shuttingDown) return; // Ctrl-C pressed twice
    shuttingDown = true;
    const ws = alive();
    console.log(`[primary] ${sig}: draining ${ws.length} workers`);
    if (ws.length === 0) process.exit(0);
    for (const w of ws) {
      // One that never listened has no request to finish (and may be SIGSTOPped).
      if (!state.get(w.id)?.listened) w.process.kill('SIGKILL');
      else retire(w);
    }
  }

  process.on('SIGTERM', () => shutdown('SIGTERM'));
  process.on('SIGINT', () => shutdown('SIGINT'));
  process.on('SIGUSR2', () => { rollingRestart().catch((err) => console.error('[primary] restart failed:', err)); });

  console.log(`[primary] ${process.pid} forking ${WORKERS} workers`);
  for (let i = 0; i < WORKERS; i++) spawn();
}

function runWorker() {
  // Start-up fault injection first, before anything listens.
  if (POISON_FILE && fs.existsSync(POISON_FILE)) throw new Error(`POISON_FILE ${POISON_FILE} exists: refusing to start`);

  // The primary decides when a worker stops (the group gets Ctrl-C / systemd's SIGTERM too).
  process.on('SIGINT', () => {});
  process.on('SIGTERM', () => {});

  let config = {};
  try { const c = JSON.parse(process.env.CLUSTER_CONFIG || '{}'); if (isObject(c)) config = c; } catch { /* keep {} */ }
  let stopping = false;
  let nextId = 0;
  const pending = new Map();

  function toPrimary(msg, cb) {
    if (!process.connected) { if (cb) cb(new Error('no channel to the primary')); return; }
    process.send(msg, (err) => { if (cb) cb(err || null); }); // a callback: no 'error' event to crash us
  }

  process.on('message', (msg) => {
    if (!isObject(msg)) return;
    if (msg.type === 'config' && isObject(msg.config)) config = msg.config;
    else if (msg.type === 'count-reply') {
      const p = pending.get(msg.id);
      if (p) { pending.delete(msg.id); clearTimeout(p.timer); p.done(msg.count); }
    } else if (msg.type === 'stop' && !stopping) {
      stopping = true;
      // Last resort at the time limit; unref'd so a drained worker exits at once.
      setTimeout(() => server.closeAllConnections(), SHUTDOWN_TIMEOUT).unref();
    }
  });

  function send(res, status, body) {
    if (res.headersSent || res.destroyed) return;
    // Decided when the answer goes out, not when the request came in: a /slow
    // started before the stop still tells its keep-alive client to leave.
    if (stopping || !server.listening) res.setHeader('Connection', 'close');
    const data = JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(data) });
    res.end(data);
  }

  function askCount(op, res) {
    const id = ++nextId;
    const timer = setTimeout(() => { pending.delete(id); send(res, 503, { pid: process.pid, error: 'primary did not answer' }); }, 5000);
    timer.unref();
    pending.set(id, { timer, done: (count) => send(res, 200, { pid: process.pid, count }) });
    toPrimary({ type: 'count', op, id }, (err) => {
      if (err && pending.delete(id)) { clearTimeout(timer); send(res, 503, { pid: process.pid, error: 'no primary' }); }
    });
  }

  const server = http.createServer((req, res) => {
    let url;
    try { url = new URL(req.url, 'http://localhost'); } catch { return send(res, 400, { pid: process.pid, error: 'bad url' }); }
    const ms = Math.min(Math.max(Number(url.searchParams.get('ms')) || 0, 0), 60000);
    const pid = process.pid;
    switch (`${req.method} ${url.pathname}`) {
      case 'GET /': return send(res, 200, { pid });
      case 'GET /heavy': { const end = Date.now() + ms; while (Date.now() < end); return send(res, 200, { pid, ms }); }
      case 'GET /crash': setImmediate(() => { throw new Error('crash requested by GET /crash'); }); return undefined;
      case 'GET /slow': setTimeout(() => send(res, 200, { pid, ms }), ms); return undefined;
      case 'GET /hang': for (;;); // eslint-disable-line no-fallthrough
      case 'GET /config': return send(res, 200, { pid, config });
      case 'GET /count': req.resume(); return askCount('get', res);
      case 'POST /count': req.resume(); return askCount('incr', res);
      case 'POST /config': {
        const chunks = [];
        req.on('data', (c) => chunks.push(c));
        req.on('end', () => {
          let body;
          try { body = JSON.parse(Buffer.concat(chunks).toString('utf8')); } catch { return send(res, 400, { pid, error: 'body is not valid JSON' }); }
          if (!isObject(body)) return send(res, 400, { pid, error: 'config must be a JSON object' });
          config = body; // this worker at once, the others through the primary
          toPrimary({ type: 'config-set', config: body }, (err) => {
            if (err) send(res, 503, { pid, error: 'could not reach the primary' });
            else send(res, 200, { pid, config: body });
          });
          return undefined;
        });
        return undefined;
      }
      default: return send(res, 404, { pid, error: 'not found' });
    }
  });

  server.listen(PORT, () => {
    toPrimary({ type: 'heartbeat' });
    // unref'd: a disconnected worker must be able to exit with this still set.
    setInterval(() => toPrimary({ type: 'heartbeat' }), BEAT_EVERY).unref();
  });
}
