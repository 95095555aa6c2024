// nginx as a verifier runs it (lesson beyond-one-machine): the learner's
// nginx.conf with its placeholders filled in, written to a fresh temporary
// folder, and nginx run from there as the user the verifier is, in a process
// group of its own (ctx.startHelper), torn down like the learner's program:
//   nginx -p <dir>/ -c nginx.conf -e error.log -g 'daemon off;'
// Its error log is read back to say what nginx saw when a step fails.
import { spawnSync } from 'node:child_process';
import { accessSync, chmodSync, constants, existsSync, mkdtempSync, readFileSync, readdirSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { delimiter, join } from 'node:path';
import { RUN_MARKER } from '../../lib/harness/processes.js';
import { request } from '../../lib/harness/http.js';
import { sleepFor } from '../../lib/harness/wait.js';

// Where package managers put nginx when PATH does not have it (sbin is not
// on a normal user's PATH on Debian).
const USUAL_PLACES = ['/usr/sbin', '/usr/local/sbin', '/usr/local/bin', '/opt/homebrew/bin', '/usr/local/nginx/sbin'];

export const INSTALL_NGINX = 'Debian/Ubuntu: sudo apt-get install nginx (then sudo systemctl disable --now nginx: the verifier runs its own); macOS: brew install nginx';

/** The nginx executable (NGINX_BIN, else PATH, else the usual places), or null. */
export function findNginx(env = process.env) {
  if (env.NGINX_BIN) return executable(env.NGINX_BIN) ? env.NGINX_BIN : null;
  const dirs = [...(env.PATH ?? '').split(delimiter).filter(Boolean), ...USUAL_PLACES];
  for (const dir of dirs) {
    const candidate = join(dir, 'nginx');
    if (executable(candidate)) return candidate;
  }
  return null;
}

function executable(file) {
  try {
    accessSync(file, constants.X_OK);
    return statSync(file).isFile();
  } catch {
    return false;
  }
}

/** "nginx version: nginx/1.22.1", or the reason it cannot say. */
export function nginxVersion(bin) {
  const r = spawnSync(bin, ['-v'], { encoding: 'utf8', timeout: 3000 });
  return (r.stderr || r.stdout || r.error?.message || '').trim();
}

/**
 * The text with each `${NAME}` of `values` replaced, and nothing else: as
 * the official nginx image's envsubst over a list of names, so nginx's own
 * `$variables` (and `${NAME}` for names not in the list) stay as written.
 */
export function fillPlaceholders(text, values) {
  return text.replace(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g, (whole, name) => (Object.hasOwn(values, name) ? String(values[name]) : whole));
}

/** `${NAME}`s in the text that fillPlaceholders will not replace. */
export function unknownPlaceholders(text, values) {
  return [...new Set([...text.matchAll(/\$\{([A-Za-z_][A-Za-z0-9_]*)\}/g)].map((m) => m[1]))].filter((n) => !Object.hasOwn(values, n));
}

/**
 * A fresh temporary folder holding the filled-in nginx.conf; nginx reads and
 * writes everything there. Readable by all: nginx started by root runs its
 * workers as nobody. remove() deletes it.
 */
export function prepareNginxDir(confFile, values) {
  removeStaleDirs();
  const dir = mkdtempSync(join(tmpdir(), `${DIR_PREFIX}`));
  chmodSync(dir, 0o755);
  writeFileSync(join(dir, OWNER_FILE), `${process.pid}\n`);
  writeFileSync(join(dir, 'nginx.conf'), fillPlaceholders(readFileSync(confFile, 'utf8'), values));
  return { dir, remove: () => rmSync(dir, { recursive: true, force: true }) };
}

const DIR_PREFIX = 'cw-nginx-';
const OWNER_FILE = 'verifier.pid';

/** Whether a pid (read from a file) names a live process. */
function pidAlive(file) {
  const pid = Number.parseInt(existsSync(file) ? readFileSync(file, 'utf8') : '', 10);
  if (!Number.isInteger(pid) || pid <= 0) return false;
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return err.code === 'EPERM';
  }
}

/**
 * The folders of verifiers that were killed (SIGKILL leaves no chance to
 * remove them): neither the verifier that made one nor its nginx runs any
 * more. The harness reaps their processes; this removes their files.
 */
function removeStaleDirs() {
  let names;
  try {
    names = readdirSync(tmpdir()).filter((n) => n.startsWith(DIR_PREFIX));
  } catch {
    return;
  }
  for (const name of names) {
    const dir = join(tmpdir(), name);
    if (!existsSync(join(dir, OWNER_FILE))) continue; // not ours to judge (or being made right now)
    if (pidAlive(join(dir, OWNER_FILE)) || pidAlive(join(dir, 'nginx.pid'))) continue;
    rmSync(dir, { recursive: true, force: true });
  }
}

/** nginx's arguments for a run from dir; `extra` goes into -g (the run's mark). */
export function nginxArgs(dir, { test = false, extra = '' } = {}) {
  return [...(test ? ['-t'] : []), '-p', `${dir}/`, '-c', 'nginx.conf', '-e', 'error.log', '-g', `daemon off;${extra}`];
}

/** The command line as the learner would type it (without the verifier's mark). */
export function nginxCommandLine(dir) {
  return `nginx -p ${dir}/ -c nginx.conf -e error.log -g 'daemon off;'`;
}

/** `nginx -t` on the folder: { ok, lines } with nginx's own words. */
export function testConfig(bin, dir) {
  const r = spawnSync(bin, nginxArgs(dir, { test: true }), { encoding: 'utf8', timeout: 10000 });
  const lines = `${r.stderr ?? ''}${r.stdout ?? ''}`.split('\n').filter(Boolean);
  if (r.error) lines.push(r.error.message);
  return { ok: r.status === 0, lines };
}

/**
 * Starts nginx as a helper of the run and waits until it answers GET / on
 * 127.0.0.1:port. Resolves { helper } or { failure: { why, lines } } (it
 * exited, or never answered within timeoutMs), never throws.
 */
export async function startNginx(ctx, { bin, dir, port, timeoutMs = 8000 }) {
  const helper = ctx.startHelper({
    command: bin,
    // The mark in the command line: nginx overwrites its environment (see lib/harness/helper.js).
    args: (mark) => nginxArgs(dir, { extra: ` env ${RUN_MARKER}=${mark};` }),
    cwd: dir,
    name: 'nginx',
    onLine: (stream, line) => ctx.reporter.programLine(stream, `[nginx] ${line}`),
  });
  ctx.log(`$ ${nginxCommandLine(dir)}`);
  const deadline = performance.now() + timeoutMs;
  for (;;) {
    if (helper.exited) {
      return { helper, failure: { why: `nginx exited at once (${helper.exit.signal ?? `code ${helper.exit.code}`})`, lines: [...helper.tail, ...errorLog(dir).lines()].slice(-15) } };
    }
    const r = await request(port, '/', { timeoutMs: 2000, signal: ctx.signal });
    if (r.ok) return { helper, first: r };
    if (performance.now() > deadline) {
      return { helper, failure: { why: `nothing answered on 127.0.0.1:${port} within ${timeoutMs / 1000} s (${r.error})`, lines: [...helper.tail, ...errorLog(dir).lines()].slice(-15) } };
    }
    await sleepFor(50, ctx.signal);
  }
}

/**
 * nginx's error log in dir, read from a point on: mark() remembers where it
 * ends now; lines(since) are the lines written after that mark (all by
 * default), upstream() those about the upstream (connect failures, "no live
 * upstreams", a server marked as failed).
 */
export function errorLog(dir) {
  const file = join(dir, 'error.log');
  const read = () => (existsSync(file) ? readFileSync(file, 'utf8') : '');
  return {
    mark: () => read().length,
    lines: (since = 0) => read().slice(since).split('\n').filter(Boolean),
    upstream(since = 0) {
      return this.lines(since).filter((l) => /upstream|no live|temporarily disabled/.test(l));
    },
  };
}

/** At most n lines, the first ones of a kind and the last ones, shortened: error logs repeat themselves. */
export function quoteLog(lines, n = 10) {
  const cut = (l) => (l.length > 300 ? `${l.slice(0, 300)}...` : l);
  if (lines.length <= n) return lines.map(cut);
  const half = Math.floor(n / 2);
  return [...lines.slice(0, half), `... (${lines.length - n} more lines)`, ...lines.slice(-half)].map(cut);
}

// nginx's defaults for a `server` in an upstream block (ngx_http_upstream_module).
const DEFAULT_MAX_FAILS = 1;
const DEFAULT_FAIL_TIMEOUT_MS = 10000;
const TIME_UNITS_MS = { ms: 1, s: 1000, m: 60000, h: 3600000, d: 86400000, w: 604800000, M: 2592000000, y: 31536000000 };

/** An nginx time ("2s", "500ms", "1m30s", "10" = seconds) in ms, or null. */
export function nginxTimeMs(text) {
  if (!/^(\d+(ms|s|m|h|d|w|M|y)?)+$/.test(text)) return null;
  let ms = 0;
  for (const [, n, unit] of text.matchAll(/(\d+)(ms|s|m|h|d|w|M|y)?/g)) ms += Number(n) * TIME_UNITS_MS[unit ?? 's'];
  return ms;
}

/**
 * The passive health nginx applies to `address` ("127.0.0.2:3000") in a
 * filled-in config: its `server` line's max_fails and fail_timeout, nginx's
 * defaults where the line leaves them out (or when no line names it).
 */
export function passiveHealth(confText, address) {
  const text = confText.replace(/#[^\n]*/g, '');
  for (const [, target, params] of text.matchAll(/(?:^|[\s;{}])server\s+(\S+?)(\s[^;]*)?;/g)) {
    if (target !== address) continue;
    const param = (name) => (params ?? '').match(new RegExp(`(?:^|\\s)${name}=(\\S+)`))?.[1];
    const maxFails = param('max_fails');
    const failTimeout = param('fail_timeout');
    return {
      maxFails: maxFails === undefined ? DEFAULT_MAX_FAILS : Number(maxFails),
      failTimeoutMs: (failTimeout === undefined ? null : nginxTimeMs(failTimeout)) ?? DEFAULT_FAIL_TIMEOUT_MS,
    };
  }
  return { maxFails: DEFAULT_MAX_FAILS, failTimeoutMs: DEFAULT_FAIL_TIMEOUT_MS };
}
