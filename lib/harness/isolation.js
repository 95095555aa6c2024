// What the containers lesson runs the learner's program under, as a container
// runtime would: its own PID namespace (the primary is PID 1 there) and a CPU
// set smaller than the machine's. Both come from util-linux and need no root
// where unprivileged user namespaces are enabled (most Linux distributions):
//   unshare --user --map-root-user --pid --fork --mount-proc --kill-child
//   taskset -c <cpu>
// --kill-child: when unshare dies (the harness's SIGKILL to the group), the
// kernel SIGKILLs node, PID 1, and with it every process of the namespace.
// Where either is missing (macOS, a kernel without user namespaces) the
// lesson's steps say so and are skipped; `doctor` reports it.
import { spawnSync } from 'node:child_process';
import { readFileSync } from 'node:fs';

const UNSHARE = ['unshare', '--user', '--map-root-user', '--pid', '--fork', '--mount-proc', '--kill-child'];
const PROBE_TIMEOUT_MS = 3000;
let cached;

function probe(argv) {
  if (process.platform !== 'linux') return { ok: false, reason: `${argv[0]} is Linux only (this is ${process.platform})` };
  const r = spawnSync(argv[0], [...argv.slice(1), 'true'], { encoding: 'utf8', timeout: PROBE_TIMEOUT_MS });
  if (r.error) return { ok: false, reason: r.error.code === 'ENOENT' ? `${argv[0]} is not installed (util-linux)` : `${argv[0]} could not run (${r.error.code ?? r.error.message})` };
  if (r.status !== 0) return { ok: false, reason: `${argv.join(' ')} true failed: ${(r.stderr || `exit code ${r.status}`).trim().split('\n')[0]}` };
  return { ok: true };
}

/** The CPUs this process may run on (Linux: its affinity mask), as numbers. */
export function allowedCpus() {
  try {
    const line = readFileSync('/proc/self/status', 'utf8').match(/^Cpus_allowed_list:\s*(.+)$/m)?.[1] ?? '';
    return line.split(',').flatMap((part) => {
      const [a, b = a] = part.split('-').map(Number);
      return Array.from({ length: b - a + 1 }, (_, i) => a + i);
    }).filter(Number.isInteger);
  } catch {
    return [];
  }
}

/**
 * Whether this machine can run a program as PID 1 of its own PID namespace,
 * and restrict its CPUs (probed once per process).
 * @returns {{ pidNamespace: { ok: boolean, reason?: string }, taskset: { ok: boolean, reason?: string } }}
 */
export function isolationSupport() {
  cached ??= {
    pidNamespace: probe(UNSHARE),
    taskset: probe(['taskset', '-c', String(allowedCpus()[0] ?? 0)]),
  };
  return cached;
}

/**
 * The prefix (for ctx.start's `prefix`) that runs node as PID 1 of a PID
 * namespace and, with `cpus`, on those CPUs only. null when neither is asked
 * for or available.
 * @param {{ pid1?: boolean, cpus?: number[] }} o
 */
export function isolationPrefix({ pid1 = false, cpus } = {}) {
  const argv = [];
  if (pid1) argv.push(...UNSHARE);
  // Inside unshare, so that taskset execs node in place: node stays unshare's only child.
  if (cpus?.length) argv.push('taskset', '-c', cpus.join(','));
  if (!argv.length) return null;
  // cpus: the program's os.availableParallelism() (ctx.expectedWorkers with WORKERS unset).
  return { argv, forks: pid1, cpus: cpus?.length ? cpus : undefined };
}
