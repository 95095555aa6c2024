// A tool the verifier runs beside the program (`pm2 reload all`, through
// LearnerProgram.runTool) has its own process group, so a signal to the
// verifier does not reach it. When the verifier ends (Ctrl-C to jest, an
// uncaught error, process.exit) it must end the tool too: an interrupted test
// run once left `pm2 reload all` waiting on a daemon that was gone.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { isAlive } from '../lib/harness/processes.js';

test('a tool still running when the verifier exits is ended with it', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'cw-tool-exit-'));
  const pidFile = join(dir, 'tool.pid');
  const script = `
    import { LearnerProgram } from './lib/harness/program.js';
    import { existsSync } from 'node:fs';
    const program = new LearnerProgram({ file: ${JSON.stringify(join(dir, 'server.js'))}, port: 1, env: {} });
    program.runTool(['-e', 'require("fs").writeFileSync(${JSON.stringify(pidFile)}, String(process.pid)); setInterval(() => {}, 1000)'], { timeoutMs: 60000 });
    const started = Date.now();
    const wait = setInterval(() => {
      if (existsSync(${JSON.stringify(pidFile)}) || Date.now() - started > 10000) process.exit(0);
    }, 20);`;
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', script], { cwd: new URL('..', import.meta.url).pathname, encoding: 'utf8', timeout: 20000 });
  expect(r.status).toBe(0);
  expect(existsSync(pidFile)).toBe(true);
  const pid = Number(readFileSync(pidFile, 'utf8'));
  // The kill is sent as the verifier exits; give the kernel a moment to reap it.
  const deadline = Date.now() + 2000;
  while (isAlive(pid) && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
  const alive = isAlive(pid);
  if (alive) process.kill(pid, 'SIGKILL');
  rmSync(dir, { recursive: true, force: true });
  expect(alive).toBe(false);
});
