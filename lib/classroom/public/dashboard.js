// The instructor's dashboard: follows the class over server-sent events and
// redraws the grid, the stuck list and the failing steps. Every text from a
// learner goes into the page as textContent, never as HTML.
import { cellStatus, stuckReasons, describeReason, failingSteps, passCounts } from './insights.js';

const $ = (id) => document.getElementById(id);
const token = new URLSearchParams(location.hash.slice(1)).get('token') ?? '';
const withToken = (path) => `${path}?token=${encodeURIComponent(token)}`;

const state = { title: '', lessons: [], learners: new Map(), joinUrl: null, joinCode: '', clockOffset: 0 };
const now = () => Date.now() + state.clockOffset;

/** An element with attributes and children (strings become text nodes). */
function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === undefined || v === null || v === false) continue;
    if (k === 'class') node.className = v;
    else node.setAttribute(k, v === true ? '' : String(v));
  }
  for (const c of children.flat()) if (c !== null && c !== undefined && c !== false) node.append(c instanceof Node ? c : String(c));
  return node;
}

const idleSelect = $('idle-minutes');
const savedMinutes = localStorage.getItem('classroom.idleMinutes');
if (savedMinutes !== null && [...idleSelect.options].some((o) => o.value === savedMinutes)) idleSelect.value = savedMinutes;
idleSelect.addEventListener('change', () => {
  localStorage.setItem('classroom.idleMinutes', idleSelect.value);
  render();
});

function setLive(kind, text) {
  $('live').dataset.state = kind;
  $('live').textContent = text;
}

function problem(text) {
  $('problem').hidden = !text;
  $('problem').textContent = text ?? '';
}

function syncClock(serverTime) {
  const t = Date.parse(serverTime);
  if (Number.isFinite(t)) state.clockOffset = t - Date.now();
}

function applySnapshot(view) {
  state.title = view.title;
  state.lessons = view.lessons;
  state.joinUrl = view.joinUrl;
  state.joinCode = view.joinCode;
  state.learners = new Map(view.learners.map((r) => [r.id, r]));
  syncClock(view.serverTime);
  render();
}

function applyUpdate(update) {
  for (const row of update.learners) state.learners.set(row.id, row);
  syncClock(update.serverTime);
  render();
}

function render() {
  document.title = `${state.title} · classroom`;
  $('title').textContent = state.title;
  if (state.joinUrl) {
    $('join').hidden = false;
    $('join-command').textContent = `cluster-workshop join ${state.joinUrl} --code ${state.joinCode} --name "<your name>"`;
  }
  $('export-csv').href = withToken('/api/export.csv');
  $('export-json').href = withToken('/api/export.json');

  const rows = [...state.learners.values()].sort((a, b) => a.name.localeCompare(b.name));
  const minutes = Number(idleSelect.value);
  const stuck = new Map(rows.map((r) => [r.id, stuckReasons(r, { now: now(), minutes, lessons: state.lessons })]).filter(([, reasons]) => reasons.length));
  renderCounts(rows, stuck);
  renderStuck(rows, stuck);
  renderGrid(rows, stuck);
  renderFailing(rows);
}

function renderCounts(rows, stuck) {
  const finished = rows.filter((r) => state.lessons.filter((l) => !l.optional).every((l) => r.lessons[l.id]?.passedAt)).length;
  $('counts').textContent = `${rows.length} learner${rows.length === 1 ? '' : 's'} · ${stuck.size} stuck · ${finished} finished`;
}

function renderStuck(rows, stuck) {
  const items = rows
    .filter((r) => stuck.has(r.id))
    .map((r) => el('li', { 'data-learner': r.id }, el('span', { class: 'who' }, r.name), ': ', stuck.get(r.id).map((reason) => describeReason(reason, state.lessons)).join('; ')));
  $('stuck').replaceChildren(...(items.length ? items : [el('li', { class: 'muted' }, 'nobody right now')]));
}

function renderGrid(rows, stuck) {
  const head = el(
    'tr',
    {},
    el('th', { class: 'learner' }, 'learner'),
    state.lessons.map((l) => el('th', { title: l.title }, `${l.number}`, el('small', {}, l.id + (l.optional ? ' (opt.)' : '')))),
  );
  $('grid').tHead.replaceChildren(head);
  const body = rows.map((r) => {
    const reasons = stuck.get(r.id) ?? [];
    const stuckLesson = reasons.find((x) => x.kind === 'failures')?.lesson;
    return el(
      'tr',
      { 'data-learner': r.id, class: reasons.length ? 'stuck' : undefined },
      el('td', { class: 'learner', 'data-learner-name': '', title: r.name }, r.name),
      state.lessons.map((l) => cell(r, l, stuckLesson === l.id)),
    );
  });
  if (!body.length) body.push(el('tr', {}, el('td', { colspan: state.lessons.length + 1, class: 'muted' }, 'No learner has joined yet.')));
  $('grid').tBodies[0].replaceChildren(...body);
}

function cell(row, lesson, isStuck) {
  const l = row.lessons[lesson.id];
  const status = cellStatus(l);
  const attrs = { 'data-lesson': lesson.id, 'data-status': status, class: `cell ${status}${isStuck ? ' stuck' : ''}` };
  if (status === 'passed') return el('td', { ...attrs, title: `passed ${time(l.passedAt)}` }, `✓ ${l.attempts}`);
  if (status === 'failing') {
    const step = lesson.steps?.[l.lastFailedStep] ?? l.lastFailedStep;
    return el('td', { ...attrs, title: `last verify failed at "${step}" (${time(l.lastAt)}); ${l.streak} in a row` }, `✗ ${l.attempts}`);
  }
  return el('td', attrs, '');
}

function time(iso) {
  const minutes = Math.floor((now() - Date.parse(iso)) / 60000);
  return minutes < 1 ? 'just now' : `${minutes} min ago`;
}

function renderFailing(rows) {
  const fails = failingSteps(rows, state.lessons);
  const passed = passCounts(rows, state.lessons);
  const blocks = state.lessons
    .filter((l) => fails[l.id].length)
    .map((l) =>
      el(
        'div',
        { class: 'lesson-fails', 'data-lesson': l.id },
        el('h3', {}, `${l.number} ${l.id}`, el('span', { class: 'muted' }, ` (${passed[l.id]} passed)`)),
        el('ol', {}, fails[l.id].slice(0, 5).map((s) => el('li', { 'data-step': s.step }, `${l.steps?.[s.step] ?? s.step}: `, el('strong', {}, `${s.learners} learner${s.learners === 1 ? '' : 's'}`), ` (${s.failures} failures)`))),
      ),
    );
  $('failing').replaceChildren(...(blocks.length ? blocks : [el('p', { class: 'muted' }, 'No failed verify yet.')]));
}

function connect() {
  if (!token) {
    setLive('reconnecting', 'no token');
    problem('This page needs the instructor token: open the dashboard URL that `cluster-workshop classroom` printed (it ends with #token=...).');
    return;
  }
  const events = new EventSource(withToken('/api/events'));
  events.addEventListener('snapshot', (e) => {
    problem(null);
    setLive('live', 'live');
    applySnapshot(JSON.parse(e.data));
  });
  events.addEventListener('update', (e) => applyUpdate(JSON.parse(e.data)));
  events.addEventListener('error', async () => {
    setLive('reconnecting', 'reconnecting…');
    // EventSource does not say why; ask once so a wrong token is explained, not retried forever.
    const r = await fetch('/api/state', { headers: { authorization: `Bearer ${token}` } }).catch(() => null);
    if (r && (r.status === 401 || r.status === 403)) {
      events.close();
      problem('The classroom refused this dashboard token. Open the exact URL that `cluster-workshop classroom` printed.');
    }
  });
}

// Idle times grow without any event: redraw now and then.
setInterval(render, 15000);
connect();
