// A real pseudo-terminal for the interactive CLI: tmux runs it, keys go in
// with send-keys, the screen comes back with capture-pane. Every wait is a
// bounded poll of the screen, never a fixed sleep.
import { execFileSync } from 'node:child_process';
import { BIN } from './cli.js';
import { untilText } from './until.js';

export const hasTmux = (() => {
  try {
    execFileSync('tmux', ['-V']);
    return true;
  } catch {
    return false;
  }
})();

let serial = 0;

/**
 * A terminal of 80x24 (or columns x rows) running `cluster-workshop` (with args; none: the menu) in cwd.
 * env: the `env ...` prefix of the command line (variables to unset and set).
 */
export function openTerminal(cwd, { env = 'env -u CI -u FORCE_COLOR NO_COLOR=1', rows = 24, columns = 80, args = [] } = {}) {
  const socket = `cw-menu-${process.pid}-${serial++}`;
  const tmux = (...args) => execFileSync('tmux', ['-L', socket, '-f', '/dev/null', ...args], { cwd }).toString();
  // After the CLI ends, the pane shows its exit code and `cat` holds it open for reading.
  const command = `${env} ${JSON.stringify(process.execPath)} ${JSON.stringify(BIN)}${args.map((a) => ` ${JSON.stringify(a)}`).join('')}; echo "EXIT:$?"; exec cat`;
  tmux('new-session', '-d', '-s', 'menu', '-x', String(columns), '-y', String(rows), '-c', cwd, command);
  const screen = () => tmux('capture-pane', '-p', '-J', '-S', '-200', '-t', 'menu');
  return {
    screen,
    /** Only what is on the screen now, without the scrollback. */
    visible: () => tmux('capture-pane', '-p', '-J', '-t', 'menu'),
    keys: (...keys) => tmux('send-keys', '-t', 'menu', ...keys),
    async waitFor(pattern, timeoutMs = 15000) {
      await untilText(screen, pattern, { timeoutMs });
      return screen();
    },
    close() {
      try {
        tmux('kill-server');
      } catch {
        // already gone
      }
    },
  };
}
