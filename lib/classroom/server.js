// The classroom server: learners join with the join code and report their
// verify outcomes; the instructor's dashboard (static files in public/, no
// build step) reads the class with the instructor token and follows it live
// over server-sent events. Wrong or missing secrets get a bare 401/403.
//
// Secrets and guessing: the join code (6 characters, projected for the
// room) is what a stranger can guess; the learner key and the instructor
// token (128 bits each) are not guessable. So only wrong join codes are
// limited per address, distinct ones only (a learner's stale code sent with
// every verify is one guess), and they hold back new joins from that address
// only: a learner already in (their key) and the instructor (the token) are
// never locked out by others' mistakes.
import { createHash } from 'node:crypto';
import { createServer } from 'node:http';
import { fileURLToPath } from 'node:url';
import express from 'express';
import { LIMITS } from './limits.js';
import { RateLimiter } from './rate-limit.js';
import { ClassroomStore, sameSecret } from './store.js';
import { lockStateFile } from './lock.js';
import { DashboardStreams } from './streams.js';
import { validateJoin, validateName, validateReportBatch } from './validate.js';
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
 * Builds the classroom: takes the state file's lock and reads the class, in
 * memory only. Nothing on disk changes until listen() has bound the port; a
 * start that fails (close() after a failed listen) leaves every file as it was.
 * @param {object} o
 * @param {string} o.stateFile
 * @param {string} [o.title]
 * @param {boolean} [o.fresh] start a new class even if stateFile holds one
 * @param {string} [o.joinUrl] the address learners use (shown on the dashboard)
 * @param {() => number} [o.now]
 * @param {object} [o.limits] overrides of LIMITS (tests)
 * @param {(line: string) => void} [o.warn] where warnings about the state go
 */
export async function createClassroom({ stateFile, title, fresh = false, joinUrl = null, now = Date.now, limits = {}, warn = (w) => console.error(`classroom: warning: ${w}`) }) {
  const lim = { ...LIMITS, ...limits };
  const lessons = lessonCatalog();
  const stepIds = new Map(lessons.map((l) => [l.id, Object.keys(l.steps)]));
  const stepSets = new Map(lessons.map((l) => [l.id, new Set(Object.keys(l.steps))]));
  const lock = lockStateFile(stateFile);
  let store;
  try {
    store = ClassroomStore.open(stateFile, { title, fresh, now, limits: lim, steps: stepIds });
  } catch (err) {
    lock.release();
    throw err;
  }
  const reportLimiter = new RateLimiter({ burst: lim.reportBurst, refillMs: lim.reportRefillMs, now });
  const codeGuesses = new RateLimiter({ burst: lim.authFailureBurst, refillMs: lim.authFailureRefillMs, now });
  const tokenGuesses = new RateLimiter({ burst: lim.authFailureBurst, refillMs: lim.authFailureRefillMs, now });
  const joinLimiter = new RateLimiter({ burst: lim.joinBurst, refillMs: lim.joinRefillMs, now });
  // Wrong codes already counted, per address: "<address> <code hash>", oldest first.
  const countedGuesses = new Map();
  const dashboards = new DashboardStreams({ max: lim.maxDashboards, maxBufferedBytes: lim.maxStreamBufferBytes });
  let listening = false;
  let port = null;

  const app = express();
  app.disable('x-powered-by');
  app.set('etag', false);
  app.use((req, res, next) => {
    res.set(SECURITY_HEADERS);
    next();
  });

  // --- secrets --------------------------------------------------------------
  const addressOf = (req) => req.socket.remoteAddress ?? '?';
  const bare = (res, status) => res.status(status).type('text/plain').send(status === 401 ? 'Unauthorized' : 'Forbidden');
  const tooMany = (res, limiter, key) => res.set('Retry-After', String(limiter.retryAfter(key))).status(429).type('text/plain').send('Too Many Requests');

  /** A wrong join code: counted once per address and code. */
  function wrongCode(req, res, code) {
    const ip = addressOf(req);
    const key = `${ip} ${createHash('sha256').update(code).digest('base64')}`;
    if (!countedGuesses.has(key)) {
      codeGuesses.take(ip);
      countedGuesses.set(key, true);
      if (countedGuesses.size > 10000) countedGuesses.delete(countedGuesses.keys().next().value);
    }
    bare(res, 403);
  }

  const givenCode = (req) => req.get('x-join-code')?.trim().toUpperCase();
  const rightCode = (code) => sameSecret(code, store.joinCode);

  // Bodies are JSON: anything else is a client mistake (415), never a guess.
  function requireJson(req, res, next) {
    if (!req.is('application/json')) return res.status(415).json({ error: 'send the body as application/json' });
    next();
  }

  const cookieName = () => `classroom_token_${port}`;
  function tokenOf(req) {
    const header = req.get('authorization');
    if (header?.startsWith('Bearer ')) return header.slice(7);
    // The dashboard's cookie (set by POST /api/session), so that the token
    // leaves the address bar and the page's links.
    for (const part of (req.get('cookie') ?? '').split(';')) {
      const [k, v] = part.trim().split('=');
      if (k === cookieName() && v) return v;
    }
    // Scripts (curl, the benchmark) may still pass it in the query.
    return typeof req.query.token === 'string' ? req.query.token : undefined;
  }

  function requireInstructor(req, res, next) {
    const ip = addressOf(req);
    const token = tokenOf(req);
    if (!token) return bare(res, 401);
    // The right token always gets in: 128 bits cannot be guessed, so only the
    // wrong ones are limited, and never by learners' wrong codes.
    if (!sameSecret(token, store.instructorToken)) {
      if (!tokenGuesses.take(ip)) return tooMany(res, tokenGuesses, ip);
      return bare(res, 403);
    }
    res.set('Cache-Control', 'no-store');
    next();
  }

  const json = express.json({ limit: lim.maxBodyBytes, strict: true });
  const badRequest = (res, error) => res.status(400).json({ error });

  // --- learners -------------------------------------------------------------
  app.post('/api/join', requireJson, (req, res, next) => {
    const ip = addressOf(req);
    const code = givenCode(req);
    if (!code) return bare(res, 401);
    if (!codeGuesses.allows(ip)) return tooMany(res, codeGuesses, ip);
    if (!rightCode(code)) return wrongCode(req, res, code);
    if (!joinLimiter.allows(ip)) return tooMany(res, joinLimiter, ip);
    next();
  }, json, async (req, res) => {
    const checked = validateJoin(req.body);
    if (checked.error) return badRequest(res, checked.error);
    const joined = store.join(checked.value.name);
    if (joined.error === 'taken') {
      return res.status(409).json({ error: `Someone in this class is already called "${checked.value.name}". Join with another name (add an initial, for example); if that is you and you lost your join, ask the instructor to let you join again under this name.` });
    }
    if (joined.error === 'full') return res.status(409).json({ error: `This class is full (${lim.maxLearners} learners).` });
    joinLimiter.take(addressOf(req));
    await store.save();
    res.status(201).json({ learner: joined.learner.id, key: joined.key, name: joined.learner.name, title: store.state.title, rejoined: joined.rejoined });
  });

  app.post('/api/reports', requireJson, json, async (req, res) => {
    const body = req.body;
    const ip = addressOf(req);
    const code = givenCode(req);
    if (!code) return bare(res, 401);
    // A learner's key (128 bits) proves who they are: their reports go on
    // even while new joins from their address wait after others' guesses.
    const learner = store.authenticate(body?.learner, body?.key);
    if (!learner || !rightCode(code)) {
      if (!codeGuesses.allows(ip)) return tooMany(res, codeGuesses, ip);
      if (!rightCode(code)) return wrongCode(req, res, code);
      return bare(res, body?.learner && body?.key ? 403 : 401);
    }
    const cost = Array.isArray(body.reports) ? Math.min(Math.max(body.reports.length, 1), lim.reportBurst) : 1;
    if (!reportLimiter.take(learner.id, cost)) {
      return res.set('Retry-After', String(reportLimiter.retryAfter(learner.id, cost))).status(429).json({ error: 'too many reports; they stay queued and go with a later verify' });
    }
    const checked = validateReportBatch(body, { lessons: stepSets });
    if (checked.error) return badRequest(res, checked.error);
    const { accepted, duplicates, saved } = store.applyReports(learner, checked.value);
    if (saved) await saved;
    res.json({ accepted, duplicates });
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

  // The dashboard trades the token from its URL for a cookie: HttpOnly, sent
  // only to /api on this port, never to another site.
  app.post('/api/session', requireInstructor, (req, res) => {
    res.set('Set-Cookie', `${cookieName()}=${store.instructorToken}; Path=/api; HttpOnly; SameSite=Strict; Max-Age=${7 * 24 * 3600}`);
    res.status(204).end();
  });

  app.get('/api/state', requireInstructor, (req, res) => res.json(view()));

  // For the load benchmark and the curious: how big the class is in memory.
  app.get('/api/stats', requireInstructor, (req, res) => {
    res.json({
      learners: store.learnerCount,
      storedAttempts: store.state.history.length,
      dashboards: dashboards.size,
      dashboardsDropped: dashboards.dropped,
      dashboardsEvicted: dashboards.evicted,
      dashboardBufferedBytes: dashboards.buffered,
      memory: process.memoryUsage(),
    });
  });

  app.get('/api/export.csv', requireInstructor, (req, res) => {
    // With a byte-order mark: Excel on Windows reads the file as UTF-8 then (Zoë, 李小龙).
    res.type('text/csv; charset=utf-8').attachment(`${fileStem()}.csv`).send(`\uFEFF${toCsv(store.rows(), lessons)}`);
  });

  app.get('/api/export.json', requireInstructor, (req, res) => {
    const body = toJson({ title: store.state.title, createdAt: store.state.createdAt, lessons, rows: store.rows(), history: store.history(), now: now() });
    res.type('application/json').attachment(`${fileStem()}.json`).send(`${JSON.stringify(body, null, 2)}\n`);
  });

  function fileStem() {
    return `classroom-${store.state.createdAt.slice(0, 10)}`;
  }

  const EVENT_HEADERS = { 'Content-Type': 'text/event-stream', 'Cache-Control': 'no-store', Connection: 'keep-alive', 'X-Accel-Buffering': 'no' };
  app.head('/api/events', requireInstructor, (req, res) => {
    res.writeHead(200, EVENT_HEADERS).end();
  });

  app.get('/api/events', requireInstructor, (req, res) => {
    res.writeHead(200, EVENT_HEADERS);
    const snapshot = `retry: 1000\nevent: snapshot\ndata: ${JSON.stringify(view())}\n\n`;
    res.write(snapshot);
    dashboards.add(res, Buffer.byteLength(snapshot));
    res.on('close', () => dashboards.delete(res));
  });

  // The instructor's changes to a learner. Mutations need JSON (a cross-site
  // form cannot send it without the browser asking first) besides the token.
  const learnerParam = (req, res) => {
    const learner = store.learner(req.params.id);
    if (!learner) res.status(404).json({ error: 'no such learner' });
    return learner;
  };

  app.delete('/api/learners/:id', requireInstructor, async (req, res) => {
    if (!learnerParam(req, res)) return;
    store.remove(req.params.id);
    await store.save();
    res.json({ removed: req.params.id });
  });

  app.patch('/api/learners/:id', requireInstructor, requireJson, json, async (req, res) => {
    if (!learnerParam(req, res)) return;
    const checked = validateName(req.body?.name);
    if (checked.error) return badRequest(res, checked.error);
    const r = store.rename(req.params.id, checked.value);
    if (r.error === 'taken') return res.status(409).json({ error: `Someone in this class is already called "${checked.value}".` });
    await store.save();
    res.json({ renamed: req.params.id, name: checked.value });
  });

  app.post('/api/learners/:id/rejoin', requireInstructor, async (req, res) => {
    const learner = learnerParam(req, res);
    if (!learner) return;
    store.allowRejoin(req.params.id);
    await store.save();
    res.json({ allowed: req.params.id, name: learner.name });
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
    const ids = [...pending];
    pending.clear();
    const rows = ids.map((id) => store.row(id)).filter(Boolean);
    const removed = ids.filter((id) => !store.learner(id));
    dashboards.broadcast(`event: update\ndata: ${JSON.stringify({ serverTime: new Date(now()).toISOString(), learners: rows, removed })}\n\n`);
  }

  const heartbeat = setInterval(() => dashboards.broadcast(`: ${Date.now()}\n\n`), HEARTBEAT_MS);
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
    /**
     * Binds the port, then (and only then) writes: the lock says where this
     * classroom listens, the state is written whole. Resolves with { port, host }.
     */
    async listen(wanted = 0, host = '127.0.0.1') {
      await new Promise((resolve, reject) => {
        server.once('error', reject);
        server.listen(wanted, host, () => {
          server.off('error', reject);
          resolve();
        });
      });
      listening = true;
      const a = server.address();
      port = a.port;
      try {
        lock.update({ port: a.port, host: a.address });
        await store.start();
      } catch (err) {
        err.stateFile = stateFile; // the state could not be written: not a network problem
        throw err;
      }
      for (const w of store.warnings) warn(w);
      return { port: a.port, host: a.address };
    },
    /** Stops accepting, ends the dashboards' streams, waits for the last write, and lets go of the state file. */
    async close() {
      clearInterval(heartbeat);
      clearTimeout(broadcastTimer);
      dashboards.endAll();
      if (listening) {
        await new Promise((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections?.();
        });
      }
      try {
        await store.close();
      } finally {
        lock.release();
      }
    },
  };
}
