// Starts `cluster-workshop classroom` as a child process (as an instructor
// would) on a free port and reads its address, join code and token from what
// it prints. Shared by the classroom tests; not a test file itself.
import { spawn } from 'node:child_process';
import { join } from 'node:path';
import { PACKAGE_ROOT } from '../lib/manifest.js';

const READY_TIMEOUT_MS = 20000;

export function startClassroomProcess({ cwd, args = [], expectExit = false }) {
  const child = spawn(process.execPath, [join(PACKAGE_ROOT, 'bin', 'cluster-workshop.js'), 'classroom', '--port', '0', '--host', '127.0.0.1', ...args], {
    cwd,
    env: { ...process.env, NO_COLOR: '1' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let output = '';
  child.stdout.on('data', (d) => (output += d));
  child.stderr.on('data', (d) => (output += d));
  const exited = new Promise((resolve) => child.on('close', (code, signal) => resolve({ code, signal })));

  if (expectExit) return exited.then(({ code }) => ({ exitCode: code, output }));

  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => {
      child.kill('SIGKILL');
      reject(new Error(`the classroom did not start within ${READY_TIMEOUT_MS} ms:\n${output}`));
    }, READY_TIMEOUT_MS);
    exited.then(({ code }) => {
      clearTimeout(timer);
      reject(new Error(`the classroom exited (${code}):\n${output}`));
    });
    const check = () => {
      const m = /#token=([0-9a-f]+)[\s\S]*Join code: (\S+)[\s\S]*join http:\/\/[^:]+:(\d+)/.exec(output);
      if (!m || !/Ctrl-C stops/.test(output)) return;
      clearTimeout(timer);
      child.stdout.off('data', check);
      let stopped = null;
      resolve({
        child,
        token: m[1],
        code: m[2],
        port: Number(m[3]),
        url: `http://127.0.0.1:${m[3]}`,
        get output() {
          return output;
        },
        /** Sends a signal and waits for the exit: { code, output }. */
        stop(signal = 'SIGINT') {
          stopped ??= (async () => {
            if (child.exitCode === null && child.signalCode === null) child.kill(signal);
            const { code } = await exited;
            return { code, output };
          })();
          return stopped;
        },
      });
    };
    child.stdout.on('data', check);
  });
}
