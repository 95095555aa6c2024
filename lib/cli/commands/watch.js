// `watch`: verifies the lesson's file every time it is saved (as rustlings
// does). Each run is the verify command's (lib/course/verify.js): progress
// recorded, the outcome reported to the classroom after `join`. A save during
// a verify cancels it (the runner takes an AbortSignal and tears the program
// down) and starts again. Keys on a terminal: h hint, r re-run (for folders
// where file events never arrive, such as WSL on a Windows drive), n next
// lesson after a pass, q quit.
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, watch as watchFolder, watchFile, unwatchFile } from 'node:fs';
import { basename, dirname, extname, relative } from 'node:path';
import { lessonFrom, fileFrom } from '../lesson-arg.js';
import { TextReporter } from '../reporter.js';
import { Progress, STATE_FILE, workspaceDir } from '../../progress.js';
import { JOIN_FILE } from '../../classroom/client.js';
import { verifyLesson } from '../../course/verify.js';
import { beginLesson } from '../../course/begin.js';
import { lessonAfter } from '../../course/lessons.js';
import { colorEnabled, makeStyle } from '../style.js';
import { onInterrupt } from '../interrupt.js';
import { EXIT } from '../errors.js';
import { afterPass } from '../after-pass.js';
import { showBegun } from '../begin-view.js';
import { showNextHint } from '../hint-view.js';

// Editors save in several writes (truncate, write, rename): wait for quiet.
const DEBOUNCE_MS = 150;
const WATCHED = new Set(['.js', '.cjs', '.mjs', '.json']);
// Files every verify writes in the workspace folder (progress, and the classroom
// join with its queue): a program saved in that folder must not re-run on them,
// or each run would start the next.
const WRITTEN_BY_VERIFY = new Set([STATE_FILE, JOIN_FILE]);

/** Whether a change to `name` in the watched folder means the program changed (main: the program's file name). */
export function changeRunsVerify(name, main) {
  if (name === main) return true;
  return WATCHED.has(extname(name)) && !WRITTEN_BY_VERIFY.has(name) && !name.startsWith('.');
}

export const options = { dir: { type: 'string' } };
export const usage = `Usage: cluster-workshop watch [lesson] [file] [--dir <workspace>]

Verifies your program now and again every time you save it. A save while a
verify runs cancels it (your program is stopped) and starts a fresh one.

  lesson   number (3) or id (respawn); default: your current lesson
  file     your program; default: the lesson's file in your workspace

Keys (in a terminal):  h hint   r re-run now   n next lesson (after a pass)   q quit
Without a terminal it verifies on every save until Ctrl-C.`;

export async function run(values, [name, file], io) {
  const where = { dir: values.dir, env: io.env, cwd: io.cwd };
  const explicitFile = file !== undefined;
  let lesson = lessonFrom(name, where);
  let path = fileFrom(lesson, file, { ...where, command: 'watch', tell: io.out });
  const dir = workspaceDir(values.dir, io.env, io.cwd);
  const color = colorEnabled(io.stdout, io.env);
  const style = makeStyle(color);
  const interactive = io.interactive();

  let pending = null; // why the next verify runs
  let running = null; // the AbortController of the verify in progress
  let loop = null;
  let last = null; // the last finished report
  let lastHash = null;
  let runs = 0;
  let quitting = false;
  let stopWatching = () => {};
  let finish;
  const finished = new Promise((resolve) => (finish = resolve));

  const hashOf = (p) => {
    try {
      return createHash('sha1').update(readFileSync(p)).digest('hex');
    } catch {
      return null;
    }
  };

  const verifyOnce = async (reason) => {
    runs += 1;
    // A fresh screen per run, as rustlings does; but keep what `n` just printed (the next lesson's file).
    if (interactive && !reason.startsWith('lesson ')) io.out('\x1b[2J\x1b[3J\x1b[H');
    io.out(style.dim(`watch · run ${runs} (${reason}) · ${relative(io.cwd, path) || path}\n`));
    lastHash = hashOf(path);
    if (!existsSync(path)) {
      io.out(style.yellow(`${path} is gone; save it again to verify.\n`));
      return;
    }
    // A cancelled step may still be finishing in the background (a throughput
    // measurement ends on its own timer): its lines must not land in the next run.
    let open = true;
    const reporter = new TextReporter({ write: (text) => open && io.out(text), color, live: Boolean(io.stdout?.isTTY) });
    const runLesson = lesson;
    // The same verify as the verify command: progress recorded, the classroom told, after the verdict is shown.
    const onVerdict = ({ report }) => {
      running = null;
      open = false;
      if (report.interrupted) return;
      last = { lesson: runLesson, report };
      if (report.passed && !explicitFile) {
        try {
          io.out(afterPass(runLesson, { io, dirFlag: values.dir }));
        } catch {
          // the comparison with the reference is a bonus here; verify shows it too
        }
      }
    };
    running = new AbortController();
    try {
      await verifyLesson({ lesson: runLesson, file: path, dir, reporter, signal: running.signal, io, onVerdict });
    } finally {
      running = null;
      open = false;
    }
  };

  const prompt = () => {
    if (quitting || pending) return;
    const keys = interactive ? `${last?.report.passed ? '[n] next lesson · ' : ''}[h] hint · [r] re-run · [q] quit` : 'Ctrl-C stops';
    const what = last?.report.passed ? style.green(`Lesson ${lesson.number} passed.`) : `Waiting for you to save ${basename(path)}.`;
    io.out(`\n${what} ${style.dim(keys)}\n`);
  };

  const request = (reason) => {
    if (quitting) return;
    pending = reason;
    running?.abort('file changed');
    loop ??= (async () => {
      while (pending && !quitting) {
        const why = pending;
        pending = null;
        await verifyOnce(why);
      }
      loop = null;
      prompt();
    })().catch((err) => {
      loop = null;
      quit(err);
    });
  };

  const startWatching = () => {
    stopWatching();
    const folder = dirname(path);
    const main = basename(path);
    let timer;
    const changed = (filename) => {
      const name = filename ? String(filename) : main;
      if (!changeRunsVerify(name, main)) return;
      clearTimeout(timer);
      timer = setTimeout(() => {
        // A save that changed nothing (or a second event for one save) is not a change.
        if (name === main && hashOf(path) === lastHash && !running) return;
        request(`${name} changed`);
      }, DEBOUNCE_MS);
    };
    try {
      const watcher = watchFolder(folder, (event, filename) => changed(filename));
      watcher.on('error', () => {});
      stopWatching = () => {
        clearTimeout(timer);
        watcher.close();
      };
    } catch (err) {
      // Some file systems refuse watchers: poll the file instead.
      io.out(style.yellow(`Cannot watch ${folder} (${err.code ?? err.message}); checking ${main} twice a second instead.\n`));
      const onStat = () => changed(main);
      watchFile(path, { interval: 500 }, onStat);
      stopWatching = () => {
        clearTimeout(timer);
        unwatchFile(path, onStat);
      };
    }
  };

  async function quit(reason) {
    if (quitting) return;
    quitting = true;
    running?.abort(typeof reason === 'string' ? reason : 'quit');
    stopWatching();
    keys?.stop();
    await loop;
    if (!(reason instanceof Error)) io.out(style.dim(`\nStopped watching (${reason}); no process of your program is left running.\n`));
    if (reason instanceof Error) finish(Promise.reject(reason));
    else finish(EXIT.ok);
  }

  const nextLesson = async () => {
    if (!last?.report.passed || last.lesson !== lesson) {
      io.out(style.dim(`n moves on once lesson ${lesson.number} passes.\n`));
      return;
    }
    const next = lessonAfter(lesson);
    if (!next) {
      io.out(style.green('That was the last lesson: the course is done.\n'));
      return;
    }
    if (explicitFile) {
      lesson = next;
      io.out(`Next: lesson ${next.number} (${next.id}), verifying the same file ${basename(path)}.\n`);
    } else {
      showBegun(next, beginLesson(next, { dir, progress: Progress.load(dir, { create: true }) }), { io, dirFlag: values.dir });
      lesson = next;
      path = fileFrom(next, undefined, where);
      startWatching();
    }
    last = null;
    request(`lesson ${next.number}`);
  };

  const showHint = () => showNextHint(lesson, Progress.load(dir), { io, dirFlag: values.dir });

  const keys = interactive
    ? listenForKeys((key) => {
        if (key === 'quit') return quit('quit');
        if (key === 'r') return request('re-run');
        if (key === 'h') {
          try {
            return showHint();
          } catch (err) {
            return io.err(`${err.message}\n`);
          }
        }
        if (key === 'n') return nextLesson().catch((err) => io.err(`${err.message}\n`));
      })
    : null;
  const release = onInterrupt((signal) => quit(signal));
  try {
    startWatching();
    request('start');
    return await finished;
  } finally {
    release();
    keys?.stop();
    stopWatching();
  }
}

/** Single keys from a terminal in raw mode; Ctrl-C, Esc and q mean quit. */
function listenForKeys(onKey, stdin = process.stdin) {
  const onData = (buf) => {
    const text = buf.toString('utf8');
    if (text === '\x03' || text === '\x1b' || text === '\x04' || text.toLowerCase() === 'q') return onKey('quit');
    if (text.length === 1) onKey(text.toLowerCase());
  };
  stdin.setRawMode?.(true);
  stdin.on('data', onData);
  stdin.resume();
  let stopped = false;
  return {
    stop() {
      if (stopped) return;
      stopped = true;
      stdin.off('data', onData);
      stdin.setRawMode?.(false);
      stdin.pause();
    },
  };
}
