// The classroom server: learners join with the join code and report their
// verify outcomes; the instructor's dashboard (static files in public/, no
// build step) reads the class with the instructor token and follows it live
// over server-sent events. Wrong or missing secrets get a bare 401/403.
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import express from 'express';
import { LIMITS } from './limits.js';
import { RateLimiter } from './rate-limit.js';
import { ClassroomStore, sameSecret } from './store.js';
import { validateJoin, validateReportBatch } from './validate.js';
import { lessonCatalog } from './catalog.js';
import { toCsv, toJson } from './export.js';

const PUBLIC_DIR = fileURLToPath(new URL('./public/', import.meta.url));
// Dashboard updates are coalesced: one event per this interval at most.
const BROADCAST_MS = 100;
const HEARTBEAT_MS = 15000;

const SECURITY_HEADERS = {
  // No inline script or style anywhere: even a name that slipped past
  // escaping could not run.
  'Content-Security-Policy': "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; frame-ancestors 'none'; base-uri 'none'; form-action 'none'",
  'X-Content-Type-Options': 'nosniff',
  'Referrer-Policy': 'no-referrer',
  'X-Frame-Options': 'DENY',
};

/**
 * @param {object} o
 * @param {string} o.stateFile
 * @param {string} [o.title]
 * @param {boolean} [o.fresh] start a new class even if stateFile holds one
 * @param {string} [o.joinUrl] the address learners use (shown on the dashboard)
 * @param {() => number} [o.now]
 * @param {object} [o.limits] overrides of LIMITS (tests)
 */
export async function createClassroom({ stateFile, title, fresh = false, joinUrl = null, now = Date.now, limits = {} }) {
  const lim = { ...LIMITS, ...limits };
  const store = ClassroomStore.open(stateFile, { title, fresh, now, limits: lim });
  // The start writes the state whole: a resumed class leaves its journal empty.
  await store.save();
  for (const w of store.warnings) console.error(`classroom: warning: ${w}`);
  const lessons = await lessonCatalog();
  const lessonIds = new Set(lessons.map((l) => l.id));
  const reportLimiter = new RateLimiter({ burst: lim.reportBurst, refillMs: lim.reportRefillMs, now });
  const authLimiter = new RateLimiter({ burst: lim.authFailureBurst, refillMs: lim.authFailureRefillMs, now });
  const dashboards = new Set();

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use((req, res, next) => {
    res.set(SECURITY_HEADERS);
    next();
  });

  // --- secrets --------------------------------------------------------------
  // Guessing is limited per client address: only failures count.
  function denied(req, res, status) {
    authLimiter.take(req.socket.remoteAddress ?? '?');
    res.status(status).type('text/plain').send(status === 401 ? 'Unauthorized' : 'Forbidden');
  }

  function guessingTooMuch(req, res) {
    const ip = req.socket.remoteAddress ?? '?';
    if (authLimiter.allows(ip)) return false;
    res.set('Retry-After', String(authLimiter.retryAfter(ip))).status(429).type('text/plain').send('Too Many Requests');
    return true;
  }

  function requireCode(req, res, next) {
    if (guessingTooMuch(req, res)) return;
    const code = req.get('x-join-code');
    if (!code) return denied(req, res, 401);
    if (!sameSecret(code.trim().toUpperCase(), store.joinCode)) return denied(req, res, 403);
    next();
  }

  function requireInstructor(req, res, next) {
    if (guessingTooMuch(req, res)) return;
    const header = req.get('authorization');
    const token = header?.startsWith('Bearer ') ? header.slice(7) : typeof req.query.token === 'string' ? req.query.token : undefined;
    if (!token) return denied(req, res, 401);
    if (!sameSecret(token, store.instructorToken)) return denied(req, res, 403);
    res.set('Cache-Control', 'no-store');
    next();
  }

  const json = express.json({ limit: lim.maxBodyBytes, strict: true });
  const badRequest = (res, error) => res.status(400).json({ error });

  // --- learners -------------------------------------------------------------
  app.post('/api/join', requireCode, json, async (req, res) => {
    const checked = validateJoin(req.body);
    if (checked.error) return badRequest(res, checked.error);
    const joined = store.join(checked.value.name);
    if (joined.error === 'taken') return res.status(409).json({ error: `Someone in this class is already called "${checked.value.name}". Join with another name (add an initial, for example).` });
    if (joined.error === 'full') return res.status(409).json({ error: `This class is full (${lim.maxLearners} learners).` });
    await store.save();
    res.status(201).json({ learner: joined.learner.id, key: joined.key, name: joined.learner.name, title: store.state.title });
  });

  app.post('/api/reports', requireCode, json, async (req, res) => {
    const body = req.body;
    const learner = store.authenticate(body?.learner, body?.key);
    if (!learner) return body?.learner && body?.key ? denied(req, res, 403) : denied(req, res, 401);
    const cost = Array.isArray(body.reports) ? Math.min(Math.max(body.reports.length, 1), lim.reportBurst) : 1;
    if (!reportLimiter.take(learner.id, cost)) {
      return res.set('Retry-After', String(reportLimiter.retryAfter(learner.id, cost))).status(429).json({ error: 'too many reports; they stay queued and go with a later verify' });
    }
    const checked = validateReportBatch(body, { lessonIds, now: now() });
    if (checked.error) return badRequest(res, checked.error);
    const result = store.applyReports(learner, checked.value);
    if (result.accepted > 0) await store.save();
    res.json(result);
  });

  // --- instructor -----------------------------------------------------------
  const view = () => ({
    title: store.state.title,
    createdAt: store.state.createdAt,
    joinCode: store.joinCode,
    joinUrl,
    lessons,
    learners: store.rows(),
    serverTime: new Date(now()).toISOString(),
    limits: { maxLearners: lim.maxLearners, maxStoredAttempts: lim.maxStoredAttempts },
  });

  app.get('/api/state', requireInstructor, (req, res) => res.json(view()));

  // For the load benchmark and the curious: how big the class is in memory.
  app.get('/api/stats', requireInstructor, (req, res) => {
    res.json({ learners: store.learnerCount, storedAttempts: store.state.history.length, dashboards: dashboards.size, memory: process.memoryUsage() });
  });

  app.get('/api/export.csv', requireInstructor, (req, res) => {
    res.type('text/csv; charset=utf-8').attachment(`${fileStem()}.csv`).send(toCsv(store.rows(), lessons));
  });

  app.get('/api/export.json', requireInstructor, (req, res) => {
    const body = toJson({ title: store.state.title, createdAt: store.state.createdAt, lessons, rows: store.rows(), history: store.history(), now: now() });
    res.type('application/json').attachment(`${fileStem()}.json`).send(`${JSON.stringify(body, null, 2)}\n`);
  });

  function fileStem() {
    return `classroom-${store.state.createdAt.slice(0, 10)}`;
  }

  app.get('/api/events', requireInstructor, (req, res) => {
    if (dashboards.size >= lim.maxDashboards) return res.status(503).json({ error: 'too many dashboards open' });
    res.writeHead(200, { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' });
    res.write(`retry: 1000\nevent: snapshot\ndata: ${JSON.stringify(view())}\n\n`);
    dashboards.add(res);
    req.on('close', () => dashboards.delete(res));
  });

  // --- live updates ---------------------------------------------------------
  const pending = new Set();
  let broadcastTimer = null;
  store.onChange((ids) => {
    for (const id of ids) pending.add(id);
    broadcastTimer ??= setTimeout(broadcast, BROADCAST_MS);
  });

  function broadcast() {
    broadcastTimer = null;
    if (pending.size === 0) return;
    const rows = [...pending].map((id) => store.row(id)).filter(Boolean);
    pending.clear();
    const msg = `event: update\ndata: ${JSON.stringify({ serverTime: new Date(now()).toISOString(), learners: rows })}\n\n`;
    for (const res of dashboards) res.write(msg);
  }

  const heartbeat = setInterval(() => {
    for (const res of dashboards) res.write(`: ${Date.now()}\n\n`);
  }, HEARTBEAT_MS);
  heartbeat.unref();

  // --- the page -------------------------------------------------------------
  app.use(express.static(PUBLIC_DIR, { index: 'index.html', maxAge: 0 }));

  app.use((req, res) => res.status(404).json({ error: 'not found' }));
  // Body parser errors (bad JSON, too large) and anything unexpected.
  app.use((err, req, res, next) => {
    if (res.headersSent) return next(err);
    const status = err.status ?? err.statusCode ?? 500;
    if (status === 413) return res.status(413).json({ error: `request body larger than ${lim.maxBodyBytes} bytes` });
    if (status >= 400 && status < 500) return res.status(status).json({ error: status === 400 ? 'invalid JSON' : 'bad request' });
    console.error(`classroom: ${err?.stack ?? err}`);
    return res.status(503).json({ error: 'the classroom could not save this; try again' });
  });

  const server = createServer(app);
  server.headersTimeout = 10000;
  server.requestTimeout = 15000;

  return {
    app,
    server,
    store,
    lessons,
    /** The address learners join with, once the port is known (shown on the dashboard). */
    setJoinUrl(url) {
      joinUrl = url;
    },
    /** Resolves with the bound { port, host }. */
    listen(port = 0, host = '127.0.0.1') {
      return new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(port, host, () => {
          server.off('error', reject);
          const a = server.address();
          resolve({ port: a.port, host: a.address });
        });
      });
    },
    /** Stops accepting, ends the dashboards' streams, and waits for the last write. */
    async close() {
      clearInterval(heartbeat);
      clearTimeout(broadcastTimer);
      for (const res of dashboards) res.end();
      dashboards.clear();
      await new Promise((resolve) => {
        server.close(() => resolve());
        server.closeAllConnections?.();
      });
      await store.close();
    },
  };
}
