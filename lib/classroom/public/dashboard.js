// The instructor's dashboard, made to be projected: follows the class over
// server-sent events and redraws the steps that fail most (what to explain
// to the whole room), who is stuck, and a compact grid of learners. Every
// text from a learner goes into the page as textContent, never as HTML.
//
// The instructor token arrives in the URL's #token=; it is read once, taken
// out of the address bar (which the room can see) and traded for an HttpOnly
// cookie that only this classroom's /api receives. Exports are fetched with
// it and saved from memory: no link on the page carries the token.
import { cellStatus, describeReason, byName, stuckList, topFailingSteps, passCounts, stepTitle } from './insights.js';

const STUCK_SHOWN = 6;
const FAILING_SHOWN = 5;
// Beyond this many learners the grid drops the numbers in its squares.
const DENSE_FROM = 60;

const $ = (id) => document.getElementById(id);

const fromUrl = new URLSearchParams(location.hash.slice(1)).get('token');
if (fromUrl !== null) history.replaceState(null, '', location.pathname + location.search);
let token = fromUrl ?? '';

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

/** A request to the classroom's API, with the token in a header while the page holds it (else the cookie). */
function api(path, { method = 'GET', body } = {}) {
  const headers = {};
  if (token) headers.authorization = `Bearer ${token}`;
  if (body !== undefined) headers['content-type'] = 'application/json';
  return fetch(path, { method, headers, body: body === undefined ? undefined : JSON.stringify(body), credentials: 'same-origin' });
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
  for (const id of update.removed ?? []) state.learners.delete(id);
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
  const rows = [...state.learners.values()].sort(byName);
  const minutes = Number(idleSelect.value);
  const options = { now: now(), minutes, lessons: state.lessons };
  const stuck = stuckList(rows, { ...options, max: STUCK_SHOWN });
  const stuckReasonsById = new Map(stuckList(rows, { ...options, max: Infinity }).shown.map((s) => [s.row.id, s.reasons]));
  renderCounts(rows, stuck.total);
  renderFailing(rows);
  renderStuck(stuck);
  renderGrid(rows, stuckReasonsById);
}

function renderCounts(rows, stuckCount) {
  const finished = rows.filter((r) => state.lessons.filter((l) => !l.optional).every((l) => r.lessons[l.id]?.passedAt)).length;
  $('counts').textContent = `${rows.length} learner${rows.length === 1 ? '' : 's'} · ${stuckCount} stuck · ${finished} finished`;
}

function renderFailing(rows) {
  const top = topFailingSteps(rows, state.lessons, FAILING_SHOWN);
  const passed = passCounts(rows, state.lessons);
  const items = top.map((s) => {
    const lesson = state.lessons.find((l) => l.id === s.lesson);
    return el(
      'li',
      { 'data-lesson': s.lesson, 'data-step': s.step },
      el('span', { class: 'who' }, `${s.learners} learner${s.learners === 1 ? '' : 's'}`),
      ': ',
      el('strong', {}, stepTitle(lesson, s.step)),
      ' ',
      el('span', { class: 'where' }, `lesson ${lesson?.number ?? '?'} ${s.lesson} · ${s.failures} failure${s.failures === 1 ? '' : 's'} · ${passed[s.lesson]} passed`),
    );
  });
  $('failing').replaceChildren(...(items.length ? items : [el('li', { class: 'muted' }, 'No failed verify yet.')]));
}

function renderStuck({ shown, more }) {
  // One line each (the full reasons on hover): the most telling reason first.
  const items = shown.map(({ row, reasons }) => {
    const why = reasons.map((r) => describeReason(r, state.lessons)).join('; ');
    return el('li', { 'data-learner': row.id, title: `${row.name}: ${why}` }, el('span', { class: 'who' }, row.name), ' ', el('span', { class: 'why' }, why));
  });
  if (more) items.push(el('li', { class: 'more muted' }, `and ${more} more (highlighted in the grid)`));
  $('stuck').replaceChildren(...(items.length ? items : [el('li', { class: 'muted' }, 'nobody right now')]));
}

function renderGrid(rows, stuck) {
  $('grid').classList.toggle('dense', rows.length >= DENSE_FROM);
  const tiles = rows.map((r) => {
    const reasons = stuck.get(r.id) ?? [];
    const stuckLesson = reasons.find((x) => x.kind === 'failures')?.lesson;
    return el(
      'div',
      { class: reasons.length ? 'tile stuck' : 'tile', 'data-learner': r.id },
      el('button', { type: 'button', class: 'name', title: r.rejoinAllowed ? `${r.name} (may join again)` : r.name, 'data-manage': r.id }, r.name),
      el('span', { class: 'cells' }, state.lessons.map((l) => cell(r, l, stuckLesson === l.id))),
    );
  });
  $('grid').replaceChildren(...(tiles.length ? tiles : [el('p', { class: 'muted' }, 'No learner has joined yet.')]));
}

function cell(row, lesson, isStuck) {
  const l = row.lessons[lesson.id];
  const status = cellStatus(l);
  const attrs = { 'data-lesson': lesson.id, 'data-status': status, class: `cell ${status}${isStuck ? ' stuck' : ''}` };
  if (status === 'passed') attrs.title = `lesson ${lesson.number} ${lesson.id}: passed ${time(l.passedAt)} after ${l.attempts} verif${l.attempts === 1 ? 'y' : 'ies'}`;
  else if (status === 'failing') attrs.title = `lesson ${lesson.number} ${lesson.id}: last verify failed at "${stepTitle(lesson, l.lastFailedStep)}" (${time(l.lastAt)}); ${l.attempts} verif${l.attempts === 1 ? 'y' : 'ies'}, ${l.streak} in a row`;
  else attrs.title = `lesson ${lesson.number} ${lesson.id}: not started`;
  return el('span', attrs, `${lesson.number}`);
}

function time(iso) {
  const minutes = Math.floor((now() - Date.parse(iso)) / 60000);
  return minutes < 1 ? 'just now' : `${minutes} min ago`;
}

// --- managing a learner (click a name) ----------------------------------------
let managed = null;
const dialog = $('manage');

function manageProblem(text) {
  $('manage-problem').hidden = !text;
  $('manage-problem').textContent = text ?? '';
}

$('grid').addEventListener('click', (e) => {
  const id = e.target.closest('[data-manage]')?.dataset.manage;
  const row = id && state.learners.get(id);
  if (!row) return;
  managed = id;
  $('manage-name').textContent = row.name;
  $('manage-rename').value = row.name;
  $('manage-remove').textContent = 'Remove from the class';
  $('manage-remove').dataset.confirm = '';
  manageProblem(null);
  dialog.showModal();
});

async function act(request, done) {
  const r = await request().catch(() => null);
  if (!r) return manageProblem('The classroom did not answer.');
  if (!r.ok) return manageProblem((await r.json().catch(() => null))?.error ?? `The classroom answered ${r.status}.`);
  done?.();
  dialog.close();
}

$('manage-save').addEventListener('click', () => act(() => api(`/api/learners/${encodeURIComponent(managed)}`, { method: 'PATCH', body: { name: $('manage-rename').value } })));
$('manage-rejoin').addEventListener('click', () => act(() => api(`/api/learners/${encodeURIComponent(managed)}/rejoin`, { method: 'POST' })));
$('manage-remove').addEventListener('click', () => {
  const button = $('manage-remove');
  // Two clicks: removing a learner cannot be undone.
  if (button.dataset.confirm !== managed) {
    button.dataset.confirm = managed;
    button.textContent = 'Click again to remove (cannot be undone)';
    return;
  }
  act(() => api(`/api/learners/${encodeURIComponent(managed)}`, { method: 'DELETE' }));
});
$('manage-close').addEventListener('click', () => dialog.close());

// --- exports: fetched with the token in a header, saved from memory --------------
async function download(path, name) {
  const r = await api(path).catch(() => null);
  if (!r?.ok) return problem(`The export failed (${r ? r.status : 'no answer'}).`);
  const url = URL.createObjectURL(await r.blob());
  const a = el('a', { href: url, download: name });
  document.body.append(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 60000);
}
$('export-csv').addEventListener('click', () => download('/api/export.csv', 'classroom.csv'));
$('export-json').addEventListener('click', () => download('/api/export.json', 'classroom.json'));

// --- the live stream ----------------------------------------------------------------
async function connect() {
  if (token) {
    // The token becomes a cookie for /api on this classroom: a reload of the page keeps working.
    const r = await api('/api/session', { method: 'POST' }).catch(() => null);
    if (r && (r.status === 401 || r.status === 403)) return refused();
  }
  const events = new EventSource('/api/events');
  events.addEventListener('snapshot', (e) => {
    problem(null);
    setLive('live', 'live');
    applySnapshot(JSON.parse(e.data));
  });
  events.addEventListener('update', (e) => applyUpdate(JSON.parse(e.data)));
  events.addEventListener('error', async () => {
    setLive('reconnecting', 'reconnecting…');
    // EventSource does not say why; ask once so a missing or wrong token is explained, not retried forever.
    const r = await api('/api/state').catch(() => null);
    if (r && (r.status === 401 || r.status === 403)) {
      events.close();
      refused(r.status);
    }
  });
}

function refused(status = 403) {
  setLive('reconnecting', 'no access');
  problem(
    status === 401 && !token
      ? 'This page needs the instructor token: open the dashboard URL that `cluster-workshop classroom` printed (it ends with #token=...).'
      : 'The classroom refused this dashboard token. Open the exact URL that `cluster-workshop classroom` printed.',
  );
}

// Idle times grow without any event: redraw now and then.
setInterval(render, 15000);
connect();
