// `doctor`: is this machine ready for the workshop? One line per check, with
// the fix for each failure. Instructors run it on every laptop before class.
// Exit 0 when every required check passes; optional ones (Redis for the redis-state lesson,
// extra loopback addresses for sticky-sessions) only warn.
import { availableParallelism } from 'node:os';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { dirname, join } from 'node:path';
import http from 'node:http';
import net from 'node:net';
import { PACKAGE_ROOT, loadLessons } from '../../manifest.js';
import { workspaceDir } from '../../progress.js';
import { installedPackageFolder } from '../../workspace.js';
import { canListen, freePort } from '../../harness/ports.js';
import { request } from '../../harness/http.js';
import { listProcesses } from '../../harness/processes.js';
import { isolationSupport } from '../../harness/isolation.js';
import { colorEnabled, makeStyle } from '../style.js';
import { EXIT } from '../errors.js';
import { DEFAULT_PORT } from '../../course/port.js';

const CHECK_TIMEOUT_MS = 3000;

export const options = { dir: { type: 'string' } };
export const usage = `Usage: cluster-workshop doctor [--dir <workspace>]

Checks that this machine can run the workshop, one line each, with the fix
for anything that fails: the Node.js version, the cores available, that a
port can be bound, that signals and the process table work, that the
workshop's packages load, that the workspace is writable, and (optional)
extra loopback addresses for the sticky-sessions lesson, Redis for the
redis-state lesson, a PID namespace and taskset for the containers lesson,
PM2 in the workspace for the process-manager lesson, and nginx (with Redis
and loopback addresses) for the beyond-one-machine lesson.

Exit code: 0 when every required check passes (warnings allowed), 1 otherwise.`;

const lessonRef = (id) => {
  const l = loadLessons().find((x) => x.id === id);
  return l ? `lesson ${l.number} (${id})` : id;
};

/** Each check resolves { status: 'ok' | 'fail' | 'warn', text, fix? }. */
export const CHECKS = [
  { name: 'node', required: true, run: checkNode },
  { name: 'cores', required: true, run: checkCores },
  { name: 'port', required: true, run: checkPort },
  { name: 'signals', required: true, run: checkSignals },
  { name: 'processes', required: true, run: checkProcessTable },
  { name: 'packages', required: true, run: checkPackages },
  { name: 'workspace', required: true, run: checkWorkspace },
  { name: 'loopback', required: false, run: checkLoopback },
  { name: 'redis', required: false, run: checkRedis },
  { name: 'containers', required: false, run: checkContainers },
  { name: 'pm2', required: false, run: checkPm2 },
  { name: 'nginx', required: false, run: checkNginx },
];

export async function run(values, positionals, io) {
  const style = makeStyle(colorEnabled(io.stdout, io.env));
  const context = { dir: workspaceDir(values.dir, io.env, io.cwd), env: io.env, platform: process.platform };
  io.out(style.bold('cluster-workshop doctor: is this machine ready for the workshop?\n\n'));
  let failed = 0;
  let warned = 0;
  for (const check of CHECKS) {
    let r;
    try {
      r = await withTimeout(check.run(context), CHECK_TIMEOUT_MS, { status: 'fail', text: `${check.name}: no answer within ${CHECK_TIMEOUT_MS / 1000} s` });
    } catch (err) {
      r = { status: 'fail', text: `${check.name}: the check itself failed (${err.message})` };
    }
    if (r.status === 'fail' && !check.required) r.status = 'warn';
    if (r.status === 'fail') failed += 1;
    if (r.status === 'warn') warned += 1;
    const mark = { ok: style.green('✓'), fail: style.red('✗'), warn: style.yellow('!') }[r.status];
    io.out(`  ${mark} ${r.text}\n`);
    if (r.fix && r.status !== 'ok') io.out(`      ${style.dim('fix:')} ${r.fix}\n`);
  }
  const warnings = warned ? ` (${warned} warning${warned === 1 ? '' : 's'}: only the lessons named need them)` : '';
  if (failed) {
    io.out(`\n${style.red(`${failed} required check${failed === 1 ? '' : 's'} failed.`)} Apply the fix shown, then run doctor again.\n`);
    return EXIT.failed;
  }
  io.out(`\n${style.green('Ready: every required check passed.')}${warnings}\n`);
  return EXIT.ok;
}

function withTimeout(promise, ms, fallback) {
  let timer;
  return Promise.race([promise, new Promise((resolve) => (timer = setTimeout(() => resolve(fallback), ms)))]).finally(() => clearTimeout(timer));
}

function checkNode() {
  const engines = JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')).engines?.node ?? '>=20.17';
  const need = (/(\d+)\.(\d+)/.exec(engines) ?? [null, '20', '17']).slice(1).map(Number);
  const have = process.versions.node.split('.').map(Number);
  const ok = have[0] > need[0] || (have[0] === need[0] && have[1] >= need[1]);
  return {
    status: ok ? 'ok' : 'fail',
    text: `Node.js ${process.versions.node} (the workshop needs ${need.join('.')} or newer)`,
    fix: 'install a current Node.js (22 LTS): https://nodejs.org/en/download, or with nvm: nvm install 22 && nvm use 22',
  };
}

function checkCores() {
  const cores = availableParallelism();
  if (cores > 1) return { status: 'ok', text: `${cores} cores available (os.availableParallelism()): a cluster can run up to ${cores} workers at once` };
  return {
    status: 'warn',
    text: '1 core available: the lessons pass, but a cluster cannot serve CPU-bound work faster than one process here (bench will show no gain)',
    fix: 'give the machine (or the VM/container) 2 or more CPUs',
  };
}

async function checkPort() {
  let port;
  try {
    port = await freePort();
  } catch (err) {
    return { status: 'fail', text: `cannot listen on 127.0.0.1 (${err.code ?? err.message})`, fix: 'a firewall or sandbox blocks local servers: allow Node.js to listen on 127.0.0.1' };
  }
  if (!(await canListen(DEFAULT_PORT))) {
    return { status: 'ok', text: `a free port can be bound (got ${port}); port ${DEFAULT_PORT} is taken, so \`run\` will pick another and say so` };
  }
  return { status: 'ok', text: `a free port can be bound (got ${port}), and port ${DEFAULT_PORT} is free for \`run\`` };
}

async function checkSignals({ platform }) {
  if (platform === 'win32') {
    return {
      status: 'fail',
      text: 'Windows: the verifier needs POSIX signals and process groups, which Windows does not have',
      fix:
        `run the workshop inside WSL (https://learn.microsoft.com/windows/wsl/install). Every lesson's verifier kills and signals your processes; ` +
        `${lessonRef('graceful-shutdown')} (SIGTERM), ${lessonRef('rolling-restart')} (SIGUSR2) and ${lessonRef('capstone')} teach signals that do not exist on Windows.`,
    };
  }
  // Send ourselves SIGUSR2, as `run`'s u key and the rolling-restart lesson do, and see it arrive.
  const arrived = await new Promise((resolve) => {
    const timer = setTimeout(() => done(false), 1000);
    const handler = () => done(true);
    function done(value) {
      clearTimeout(timer);
      process.off('SIGUSR2', handler);
      resolve(value);
    }
    process.on('SIGUSR2', handler);
    process.kill(process.pid, 'SIGUSR2');
  });
  return arrived
    ? { status: 'ok', text: 'signals work (SIGUSR2 sent and received)' }
    : { status: 'fail', text: 'a signal sent to this process never arrived', fix: 'a sandbox blocks signals: run the workshop in a normal terminal, not a restricted container' };
}

function checkProcessTable({ platform }) {
  let procs;
  try {
    procs = listProcesses();
  } catch (err) {
    return { status: 'fail', text: `cannot read the process table (${err.message})`, fix: 'the verifier finds workers with /proc or `ps`: install procps (apt-get install procps)' };
  }
  if (!procs.some((p) => p.pid === process.pid)) {
    return { status: 'fail', text: 'the process table does not show this process', fix: 'run outside a sandbox that hides processes (the verifier finds your workers there)' };
  }
  const how = platform === 'linux' ? '/proc' : '`ps` (processes that leave their group are found on Linux only)';
  return { status: 'ok', text: `the process table can be read (${how}): the verifier finds your workers there` };
}

function checkPackages() {
  const deps = Object.keys(JSON.parse(readFileSync(join(PACKAGE_ROOT, 'package.json'), 'utf8')).dependencies ?? {});
  const missing = deps.filter((d) => !installedPackageFolder(d));
  if (missing.length) {
    return { status: 'fail', text: `the workshop's packages are missing: ${missing.join(', ')}`, fix: 'reinstall: npx cluster-workshop@latest (from a clone: npm install)' };
  }
  return { status: 'ok', text: `the workshop's packages are installed (${deps.join(', ')})` };
}

function checkWorkspace({ dir }) {
  // The workspace, or the nearest folder above it that exists (where start would create it).
  let folder = dir;
  while (!existsSync(folder) && dirname(folder) !== folder) folder = dirname(folder);
  try {
    const probe = mkdtempSync(join(folder, '.cluster-workshop-doctor-'));
    rmSync(probe, { recursive: true, force: true });
  } catch (err) {
    return {
      status: 'fail',
      text: `the workspace ${dir} is not writable (${err.code ?? err.message} in ${folder})`,
      fix: 'run the workshop from a folder you own (cd ~ && mkdir cluster && cd cluster), or give one with --dir <folder>',
    };
  }
  return { status: 'ok', text: `the workspace ${dir} is writable${existsSync(dir) ? '' : ' (it does not exist yet; start creates it)'}` };
}

async function checkLoopback({ platform }) {
  const server = http.createServer((req, res) => res.end(JSON.stringify({ pid: process.pid, from: req.socket.remoteAddress })));
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const { port } = server.address();
    const bad = [];
    for (const address of ['127.0.0.2', '127.0.0.3']) {
      const r = await request(port, '/', { localAddress: address, timeoutMs: 1000 });
      if (!r.ok || r.json?.from?.replace(/^::ffff:/, '') !== address) bad.push(`${address}: ${r.error ?? `seen as ${r.json?.from}`}`);
    }
    if (bad.length === 0) return { status: 'ok', text: `extra loopback addresses work (127.0.0.2, 127.0.0.3), as ${lessonRef('sticky-sessions')} needs` };
    return {
      status: 'fail',
      text: `extra loopback addresses do not work (${bad.join('; ')}); only ${lessonRef('sticky-sessions')} needs them`,
      fix: platform === 'darwin' ? 'add them (until the next reboot): for i in 2 3 4 5; do sudo ifconfig lo0 alias 127.0.0.$i up; done' : 'add them: sudo ip addr add 127.0.0.2/8 dev lo (and .3, .4, .5)',
    };
  } finally {
    server.close();
  }
}

async function checkRedis({ env }) {
  const url = new URL(env.REDIS_URL || 'redis://127.0.0.1:6379');
  const host = url.hostname || '127.0.0.1';
  const port = Number(url.port) || 6379;
  const where = `${host}:${port}${env.REDIS_URL ? ' (REDIS_URL)' : ''}`;
  const reply = await new Promise((resolve) => {
    const socket = net.connect({ host, port });
    let text = '';
    const end = (value) => {
      socket.destroy();
      resolve(value);
    };
    socket.setTimeout(1500, () => end('no answer within 1.5 s'));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (d) => {
      text += d;
      if (text.includes('\r\n')) end(text.trim());
    });
    socket.on('error', (err) => end(err.code === 'ECONNREFUSED' ? 'connection refused: nothing listens there' : err.message));
  });
  if (reply === '+PONG') return { status: 'ok', text: `Redis answers at ${where}, as ${lessonRef('redis-state')} needs` };
  return {
    status: 'fail',
    text: `Redis does not answer at ${where} (${reply}); only ${lessonRef('redis-state')} needs it, and it is optional`,
    fix: 'start one: docker run -d -p 6379:6379 redis (or apt-get install redis-server / brew install redis), or set REDIS_URL',
  };
}

/** The containers lesson runs the program as PID 1 of a PID namespace (unshare) on one CPU (taskset). */
async function checkContainers({ platform }) {
  const { pidNamespace, taskset } = isolationSupport();
  if (pidNamespace.ok && taskset.ok) {
    return { status: 'ok', text: `a program can run as PID 1 of its own PID namespace (unshare) on chosen CPUs (taskset), as ${lessonRef('containers')} needs` };
  }
  const missing = [!pidNamespace.ok && `PID 1: ${pidNamespace.reason}`, !taskset.ok && `CPU set: ${taskset.reason}`].filter(Boolean);
  return {
    status: 'warn',
    text: `${lessonRef('containers')} will skip its ${missing.length === 2 ? 'PID 1 and CPU' : pidNamespace.ok ? 'CPU' : 'PID 1'} steps (${missing.join('; ')}); its Dockerfile checks still run`,
    fix:
      platform === 'linux'
        ? 'install util-linux (unshare, taskset); if unshare fails, enable unprivileged user namespaces: sudo sysctl kernel.unprivileged_userns_clone=1 (Debian) or user.max_user_namespaces=15000, or on Ubuntu 24.04 kernel.apparmor_restrict_unprivileged_userns=0'
        : 'these steps need Linux: use a Linux machine or VM (WSL 2 works)',
  };
}

/**
 * The process-manager lesson runs the PM2 its program finds: node_modules/pm2
 * in the workspace or a folder above it (the workshop does not depend on PM2,
 * which is AGPL-3.0; the learner installs it).
 */
async function checkPm2({ dir }) {
  for (let d = dir; ; d = dirname(d)) {
    const pkg = join(d, 'node_modules', 'pm2', 'package.json');
    if (existsSync(pkg)) {
      let version = '';
      try {
        version = ` ${JSON.parse(readFileSync(pkg, 'utf8')).version}`;
      } catch {
        version = '';
      }
      return { status: 'ok', text: `PM2${version} is installed (${join(d, 'node_modules', 'pm2')}), as ${lessonRef('process-manager')} needs` };
    }
    if (dirname(d) === d) break;
  }
  return {
    status: 'fail',
    text: `PM2 is not installed in the workspace ${dir}; only ${lessonRef('process-manager')} needs it, and it is optional`,
    // Before the first `start` there is no workspace to cd into: the folder it
    // will be made in works as well, as a program finds PM2 in any folder above.
    fix: existsSync(dir)
      ? `cd ${dir} && npm install pm2   (PM2 is AGPL-3.0; the workshop does not install it for you)`
      : `npm install --prefix ${dirname(dir)} pm2   (your workspace, ${dir}, is not made yet: its programs find PM2 in the folder above it too; PM2 is AGPL-3.0, the workshop does not install it for you)`,
  };
}

/**
 * The beyond-one-machine lesson runs a real nginx (unprivileged, from a
 * temporary folder) in front of two machines on 127.0.0.2 and 127.0.0.3,
 * with Redis for the sessions and clients from 127.0.1.10 to 127.0.16.10
 * (one per /24, as nginx's ip_hash tells clients apart).
 */
async function checkNginx({ env, platform }) {
  const { findNginx, nginxVersion, INSTALL_NGINX } = await import('../../../verify/shared/nginx.js');
  const { tryAddresses, clientsInOwnNetworks, macAliasCommand } = await import('../../../verify/shared/addresses.js');
  const bin = findNginx(env);
  const addresses = ['127.0.0.2', '127.0.0.3', ...clientsInOwnNetworks(16)];
  const badAddress = await tryAddresses(addresses);
  const missing = [!bin && 'nginx is not installed', badAddress && `the address ${badAddress.address} cannot be used (${badAddress.code})`].filter(Boolean);
  if (!missing.length) return { status: 'ok', text: `${nginxVersion(bin)} (${bin}) and the loopback addresses it needs, as ${lessonRef('beyond-one-machine')} needs (with Redis)` };
  const fixes = [
    !bin && (platform === 'darwin' ? 'brew install nginx redis' : `${INSTALL_NGINX}; it also needs Redis (sudo apt-get install redis-server)`),
    badAddress && (platform === 'darwin' ? macAliasCommand(addresses) : 'sudo ip addr add 127.0.0.0/8 dev lo (all of 127.0.0.0/8 on the loopback interface)'),
  ].filter(Boolean);
  return {
    status: 'fail',
    text: `${missing.join('; ')}; only ${lessonRef('beyond-one-machine')} needs it, and it is optional`,
    fix: fixes.join('; then '),
  };
}
