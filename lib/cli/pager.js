// Long text (a lesson is about 90 lines) in a terminal: through the learner's
// $PAGER, else `less -R` (colours kept) where it exists, else a small pager
// of our own, so the start of the text does not scroll away. Text that fits
// the screen, and any output that is not a terminal (a pipe, a file, CI), is
// written as it is.
import { spawn } from 'node:child_process';
import { existsSync } from 'node:fs';
import { delimiter, join } from 'node:path';

/**
 * Writes text through a pager when io.stdout is a terminal and the text is
 * taller than it; resolves when the learner has left the pager.
 * @param {string} text
 * @param {{ out: (s: string) => void, stdout: NodeJS.WriteStream, env: object, stdin?: NodeJS.ReadStream }} io
 */
export async function page(text, io) {
  const stdout = io.stdout ?? process.stdout;
  const stdin = io.stdin ?? process.stdin;
  const rows = stdout.rows || 24;
  if (!stdout.isTTY || text.split('\n').length < rows) {
    io.out(text);
    return;
  }
  const pager = pagerCommand(io.env ?? process.env);
  if (pager) {
    const ok = await runExternal(pager, text, stdin);
    if (ok) return;
  }
  if (stdin.isTTY) return builtInPager(text, { stdout, stdin, rows });
  io.out(text);
}

/** $PAGER as the learner set it (a shell command line), else less -R when it is on PATH, else null. */
export function pagerCommand(env) {
  const configured = (env.PAGER ?? '').trim();
  if (configured) return { shell: configured };
  const less = onPath(process.platform === 'win32' ? 'less.exe' : 'less', env);
  return less ? { file: less, args: ['-R'] } : null;
}

function onPath(name, env) {
  for (const dir of (env.PATH ?? env.Path ?? '').split(delimiter)) {
    if (dir && existsSync(join(dir, name))) return join(dir, name);
  }
  return null;
}

// Resolves true when the pager ran (whatever its exit code), false when it could not start.
function runExternal(pager, text, stdin) {
  return new Promise((resolve) => {
    // The pager reads the keyboard; we must not read it too, and Ctrl-C is the pager's (less ignores it).
    // Only a stdin already being read (the menu's) is paused and resumed: resuming one nobody read would keep us alive.
    const flowing = stdin.readableFlowing === true;
    if (flowing) stdin.pause();
    const ignoreInterrupt = () => {};
    process.on('SIGINT', ignoreInterrupt);
    const child = pager.shell
      ? spawn(pager.shell, { shell: true, stdio: ['pipe', 'inherit', 'inherit'] })
      : spawn(pager.file, pager.args, { stdio: ['pipe', 'inherit', 'inherit'] });
    let started = false;
    child.once('spawn', () => (started = true));
    child.stdin.on('error', () => {}); // EPIPE: the learner quit before the end
    child.stdin.end(text);
    const done = (ran) => {
      process.off('SIGINT', ignoreInterrupt);
      if (flowing) stdin.resume();
      resolve(ran);
    };
    child.once('error', () => done(false));
    child.once('close', (code) => done(started && code !== 127)); // 127: the shell found no such pager
  });
}

const PROMPT = '-- more: space next page, Enter next line, q quit --';

/** One screen at a time, for a terminal without less and without $PAGER. */
function builtInPager(text, { stdout, stdin, rows }) {
  const lines = text.replace(/\n$/, '').split('\n');
  const height = Math.max(rows - 1, 1);
  let shown = 0;
  const show = (n) => {
    const chunk = lines.slice(shown, shown + n);
    shown += chunk.length;
    stdout.write(`${chunk.join('\n')}\n`);
  };
  show(height);
  if (shown >= lines.length) return Promise.resolve();
  return new Promise((resolve) => {
    const wasRaw = stdin.isRaw;
    stdin.setRawMode?.(true);
    stdin.resume();
    stdout.write(PROMPT);
    const clearPrompt = () => stdout.write(`\r${' '.repeat(PROMPT.length)}\r`);
    const onData = (buf) => {
      const key = buf.toString();
      clearPrompt();
      if (key === 'q' || key === 'Q' || key === '\u0003' || key === '\u001b') return finish();
      if (key === '\r' || key === '\n' || key === 'j') show(1);
      else show(height);
      if (shown >= lines.length) return finish();
      stdout.write(PROMPT);
    };
    const finish = () => {
      stdin.off('data', onData);
      stdin.setRawMode?.(Boolean(wasRaw));
      stdin.pause();
      resolve();
    };
    stdin.on('data', onData);
  });
}
