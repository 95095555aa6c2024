// The live view of `run` on a terminal: a full-screen panel redrawn in place
// (the alternate screen, so the learner's scrollback is untouched), sized for
// a projector at 80x24, with single-key actions. Everything it shows comes
// from a ClusterObserver.
import { formatDuration } from './observer.js';

const ALT_ON = '\x1b[?1049h\x1b[?25l';
const ALT_OFF = '\x1b[?25h\x1b[?1049l';
const OUTPUT_KEPT = 100;

export const KEYS = [
  ['b', 'burst', 'burst'],
  ['k', 'kill', 'kill a worker'],
  ['u', 'usr2', 'SIGUSR2'],
  ['t', 'term', 'SIGTERM'],
  ['q', 'quit', 'quit'],
];

export class LivePanel {
  /**
   * @param {object} o
   * @param {import('./observer.js').ClusterObserver} o.observer
   * @param {string} o.title first line (lesson, URL)
   * @param {string[]} o.tryLines curl lines
   * @param {(action: string) => void} o.onAction 'burst' | 'kill' | 'usr2' | 'term' | 'quit'
   */
  constructor({ observer, stdout, stdin, title, tryLines = [], style, onAction }) {
    this.observer = observer;
    this.stdout = stdout;
    this.stdin = stdin;
    this.title = title;
    this.tryLines = tryLines;
    this.style = style;
    this.onAction = onAction;
    this.output = [];
    this.active = false;
    this.onData = (buf) => this.key(buf.toString('utf8'));
    this.onChange = () => this.schedule();
    this.onResize = () => this.render();
    this.restoreOnExit = () => this.active && this.stdout.write(ALT_OFF);
  }

  start() {
    this.active = true;
    this.stdout.write(ALT_ON);
    process.on('exit', this.restoreOnExit);
    this.stdin.setRawMode?.(true);
    this.stdin.on('data', this.onData);
    this.stdin.resume();
    this.observer.on('change', this.onChange);
    this.stdout.on('resize', this.onResize);
    this.tick = setInterval(() => this.render(), 1000); // uptimes move
    this.render();
  }

  stop() {
    if (!this.active) return;
    this.active = false;
    clearInterval(this.tick);
    clearTimeout(this.pending);
    this.observer.off('change', this.onChange);
    this.stdout.off('resize', this.onResize);
    this.stdin.off('data', this.onData);
    this.stdin.setRawMode?.(false);
    this.stdin.pause();
    this.stdout.write(ALT_OFF);
    process.off('exit', this.restoreOnExit);
  }

  key(text) {
    if (text === '\x03' || text === '\x1b' || text === '\x04') return this.onAction('quit'); // Ctrl-C, Esc, Ctrl-D
    const key = KEYS.find(([k]) => k === text.toLowerCase());
    if (key) this.onAction(key[1]);
  }

  addOutput(stream, line) {
    this.output.push({ stream, line });
    if (this.output.length > OUTPUT_KEPT) this.output.shift();
    this.schedule();
  }

  schedule() {
    if (!this.active || this.pending) return;
    this.pending = setTimeout(() => {
      this.pending = null;
      this.render();
    }, 80);
  }

  render() {
    if (!this.active) return;
    const cols = Math.max(40, this.stdout.columns || 80);
    const rows = Math.max(12, this.stdout.rows || 24);
    const lines = panelLines(this, cols, rows);
    const fitted = lines.slice(0, rows).map(([text, paint]) => {
      const cut = text.length > cols ? `${text.slice(0, cols - 1)}…` : text;
      return `${paint ? paint(cut) : cut}\x1b[K`;
    });
    this.stdout.write(`\x1b[H${fitted.join('\r\n')}\x1b[J`);
  }
}

/** The panel as [text, paint] rows: plain text is measured, then painted. */
export function panelLines(panel, cols, rows) {
  const { observer: o, style: s } = panel;
  const now = o.now();
  const workers = [...o.workers.values()].sort((a, b) => a.since - b.since || a.pid - b.pid);
  const most = Math.max(1, ...workers.map((w) => w.requests));
  const barWidth = Math.max(6, Math.min(30, cols - 44));

  const head = [
    [panel.title, s.bold],
    [
      `${o.expected === 0 ? 'process' : 'primary'} ${o.program.pid} · up ${formatDuration(now - o.startedAt)} · workers ${workers.length}/${o.expected} · restarts ${o.restarts} · deaths ${o.deaths}`,
      null,
    ],
    [`  ${'worker'.padEnd(8)} ${'uptime'.padEnd(7)} ${'requests served'.padEnd(barWidth + 7)} status`, s.dim],
  ];
  const keys = [[KEYS.map(([k, , label]) => `[${k}] ${label}`).join('  '), s.cyan]];
  // The lesson's own routes first (GET / is what the probes already do); two at most on a small screen.
  const lessonRoutes = panel.tryLines.filter((l) => !/:\d+\/'?$/.test(l));
  const tryRows = (lessonRoutes.length ? lessonRoutes : panel.tryLines).slice(0, rows >= 30 ? 4 : 2).map((l, i) => [`${i ? '     ' : 'try: '}${l}`, s.dim]);

  // Rows left for workers, events and output, at least one each.
  const spare = rows - head.length - keys.length - tryRows.length - 2;
  const workerRows = Math.max(1, Math.min(workers.length || 1, Math.floor(spare / 3)));
  const eventRows = Math.max(1, Math.ceil((spare - workerRows) * 0.55));
  const outputRows = Math.max(1, spare - workerRows - eventRows);

  const workerLines = [];
  if (!workers.length && o.expected === 0) {
    workerLines.push([`  ${String(o.program.pid).padEnd(8)} ${formatDuration(now - o.startedAt).padEnd(7)} one process, no cluster: it served ${o.primaryRequests} of our requests`, null]);
  } else if (!workers.length) workerLines.push(['  (no workers in the process table)', s.yellow]);
  for (const w of workers.slice(0, workers.length > workerRows ? workerRows - 1 : workerRows)) {
    const filled = Math.round((w.requests / most) * barWidth);
    const bar = `${'█'.repeat(filled)}${'·'.repeat(barWidth - filled)}`;
    workerLines.push([
      `  ${String(w.pid).padEnd(8)} ${formatDuration(now - w.since).padEnd(7)} ${bar} ${String(w.requests).padStart(5)} ${w.answering ? 'listening' : 'not answering yet'}`,
      w.answering ? null : s.yellow,
    ]);
  }
  if (workers.length > workerRows) workerLines.push([`  ... and ${workers.length - workerRows + 1} more`, s.dim]);

  const paintEvent = { died: s.red, exit: s.red, forked: s.green, listening: s.green, action: s.cyan, probe: s.yellow, note: s.yellow };
  const eventLines = o.events.slice(-eventRows).map((e) => [`  ${clock(e.at)} ${e.text}`, paintEvent[e.kind]]);
  const outputLines = panel.output.slice(-outputRows).map(({ stream, line }) => [`  ${line}`, stream === 'stderr' ? s.yellow : null]);

  return [
    ...head,
    ...workerLines,
    ['events', s.bold],
    ...pad(eventLines, eventRows),
    ['your program', s.bold],
    ...pad(outputLines, outputRows),
    ...tryRows,
    ...keys,
  ];
}

function pad(lines, n) {
  return [...lines, ...Array.from({ length: Math.max(0, n - lines.length) }, () => ['', null])];
}

function clock(ms) {
  return new Date(ms).toTimeString().slice(0, 8);
}
