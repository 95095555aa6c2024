import { resolve } from 'node:path';
import { networkInterfaces } from 'node:os';
import { UsageError, EXIT } from '../errors.js';

export const DEFAULT_PORT = 4100;
export const DEFAULT_STATE_FILE = 'cluster-workshop-classroom.json';
const STOP_SIGNALS = ['SIGINT', 'SIGTERM', 'SIGHUP'];

export const options = {
  port: { type: 'string' },
  host: { type: 'string' },
  title: { type: 'string' },
  state: { type: 'string' },
  new: { type: 'boolean' },
};
export const usage = `Usage: cluster-workshop classroom [--port <n>] [--host <address>] [--title <text>] [--state <file>] [--new]

Runs a classroom for instructors: learners join it, and every verify they run
reports its outcome (lesson, passed or not, the failed step, duration,
attempts; never their code). It prints the dashboard URL (with your
instructor token: keep it to yourself), the join code, and the command
learners type. Ctrl-C stops it.

  --port    port to listen on (default ${DEFAULT_PORT}; 0 picks a free one)
  --host    address to listen on (default 0.0.0.0: every network interface)
  --title   the class's name on the dashboard (default "Cluster workshop")
  --state   the file the class is saved in (default ./${DEFAULT_STATE_FILE});
            starting again with the same file resumes the class: same code,
            token and results
  --new     start a new class even if the state file holds one (the old file
            is kept beside it)

One state file has one classroom: a second one started on it refuses and
names the pid and port of the one that holds it.

Exit code: 0 stopped with Ctrl-C, 2 usage error (bad option, port in use,
state file damaged or in use by another classroom).`;

// Ports that fetch (and every browser) refuses to connect to: learners could
// never reach a classroom there (the Fetch standard's "bad ports").
const FETCH_BAD_PORTS = new Set([1, 7, 9, 11, 13, 15, 17, 19, 20, 21, 22, 23, 25, 37, 42, 43, 53, 69, 77, 79, 87, 95, 101, 102, 103, 104, 109, 110, 111, 113, 115, 117, 119, 123, 135, 137, 139, 143, 161, 179, 389, 427, 465, 512, 513, 514, 515, 526, 530, 531, 532, 540, 548, 554, 556, 563, 587, 601, 636, 989, 990, 993, 995, 1719, 1720, 1723, 2049, 3659, 4045, 4190, 5060, 5061, 6000, 6566, 6665, 6666, 6667, 6668, 6669, 6697, 10080]);

function parsePort(text) {
  if (text === undefined) return DEFAULT_PORT;
  if (!/^\d+$/.test(text) || Number(text) > 65535) throw new UsageError(`--port must be a number from 0 to 65535 (got "${text}").`);
  if (FETCH_BAD_PORTS.has(Number(text))) throw new UsageError(`Port ${text} is one that browsers and fetch refuse to connect to: neither learners nor your dashboard could reach it. Choose another with --port (for example --port ${DEFAULT_PORT}).`);
  return Number(text);
}

/** The addresses other machines can use to reach this one (IPv4, not loopback). */
export function lanAddresses() {
  return Object.values(networkInterfaces())
    .flat()
    .filter((a) => a && a.family === 'IPv4' && !a.internal)
    .map((a) => a.address);
}

const urlHost = (host) => (host.includes(':') ? `[${host}]` : host);

/** Resolves with the name of the first stop signal (handlers are in place when this returns). */
function stopSignal() {
  return new Promise((resolveSignal) => {
    const handler = (sig) => {
      for (const s of STOP_SIGNALS) process.off(s, handler);
      resolveSignal(sig);
    };
    for (const s of STOP_SIGNALS) process.on(s, handler);
  });
}

export async function run(values, positionals, io) {
  if (positionals.length) throw new UsageError(`classroom takes no arguments (got "${positionals[0]}").\n\n${usage}`);
  const port = parsePort(values.port);
  const host = values.host ?? '0.0.0.0';
  const { validateTitle } = await import('../../classroom/validate.js');
  let title;
  if (values.title !== undefined) {
    const checked = validateTitle(values.title);
    if (checked.error) throw new UsageError(`--title: ${checked.error}.`);
    title = checked.value;
  }
  const stateFile = resolve(io.cwd, values.state ?? DEFAULT_STATE_FILE);
  const { createClassroom } = await import('../../classroom/server.js');
  const { StateFileError } = await import('../../classroom/store.js');

  const wildcard = host === '0.0.0.0' || host === '::';
  const lan = wildcard ? lanAddresses() : [];
  let classroom;
  try {
    // Takes the state file's lock and reads it; nothing is written before listening.
    classroom = await createClassroom({ stateFile, title, fresh: Boolean(values.new), warn: (w) => io.err(`warning: ${w}\n`) });
  } catch (err) {
    if (err instanceof StateFileError) throw new UsageError(err.message);
    if (['EACCES', 'EPERM', 'EROFS', 'ENOTDIR'].includes(err.code)) throw new UsageError(`Cannot write the classroom state file ${stateFile} (${err.code}). Choose a writable place with --state <file>.`);
    throw err;
  }
  let bound;
  try {
    bound = await classroom.listen(port, host);
  } catch (err) {
    // A failed start changes nothing on disk: close() only lets go of the lock.
    await classroom.close().catch(() => {});
    if (err.stateFile) throw new UsageError(`Cannot write the classroom state file ${stateFile} (${err.code ?? err.message}). Choose a writable place with --state <file>.`);
    if (err.code === 'EADDRINUSE') throw new UsageError(`Port ${port} is already in use on ${host}. Choose another with --port (for example --port ${port + 1}), or stop what uses it.`);
    if (err.code === 'EADDRNOTAVAIL' || err.code === 'ENOTFOUND') throw new UsageError(`This machine has no address ${host}. Leave out --host to listen on every interface.`);
    if (err.code === 'EACCES') throw new UsageError(`Not allowed to listen on port ${port}. Choose a port above 1023 with --port.`);
    throw err;
  }
  // Listening for Ctrl-C before saying that it stops the classroom.
  const stopped = stopSignal();
  const joinHost = wildcard ? (lan[0] ?? '127.0.0.1') : host;
  const joinUrl = `http://${urlHost(joinHost)}:${bound.port}`;
  classroom.setJoinUrl(joinUrl);
  const dashboardHost = wildcard ? 'localhost' : urlHost(host);
  const { store } = classroom;
  const resumed = store.resumed ? ` (resumed: ${store.learnerCount} learner${store.learnerCount === 1 ? '' : 's'})` : '';

  io.out(`Classroom "${store.state.title}" is running${resumed}.
State file: ${stateFile}

Dashboard (keep this link to yourself: it holds your instructor token):
  http://${dashboardHost}:${bound.port}/#token=${store.instructorToken}

Join code: ${store.joinCode}
Learners type:
  cluster-workshop join ${joinUrl} --code ${store.joinCode} --name "<your name>"
`);
  for (const other of lan.slice(1)) io.out(`  (or, on another network: http://${other}:${bound.port})\n`);
  if (wildcard && lan.length === 0) io.out('Note: this machine has no network address besides loopback; only learners on this machine can join.\n');
  io.out(`\nCtrl-C stops the classroom. Running it again with the same state file resumes the class.\n`);

  const signal = await stopped;
  await classroom.close();
  io.out(`\nClassroom stopped (${signal}); everything is saved in ${stateFile}.\n`);
  return EXIT.ok;
}
