// Lesson 9 (sticky-sessions): the primary routes each client address to one
// worker. From 16 client addresses (127.0.0.10 to .25, bound with
// localAddress): each address always reaches the same worker and its visits
// count 1..5 there; the addresses spread over several workers; after a worker
// is SIGKILLed, every address is served again within 2 s and none hangs.
import net from 'node:net';
import { setMaxListeners } from 'node:events';
import { countWorkers } from './shared/workers.js';
import { isReaped } from '../lib/harness/processes.js';
import { connectionsHeld } from '../lib/harness/sockets.js';
import { pipelined } from '../lib/harness/pipelined.js';

const WORKERS = 3;
const ADDRESSES = Array.from({ length: 16 }, (_, i) => `127.0.0.${10 + i}`);
const VISITS = 5;
const RECOVERY_MS = 2000;
const HANG_MS = 2000;
// The queued-connections check: requests pipelined on one connection to keep
// a worker busy, the requests that wait in the primary meanwhile, and how many
// rounds (one address each) may run until one proves the point.
const BATCH = 1500;
const BEHIND = 5;
const ROUNDS = 5;
const HANGS_EXPLANATION =
  'A connection the primary accepted never reached a worker that reads it. Usually the server in the primary was created without pauseOnConnect: true, so the primary reads the first bytes of the request itself, and those bytes are lost when the socket moves to the worker, which then waits forever for a request.';
const HANGS_HINT =
  "net.createServer({ pauseOnConnect: true }, (socket) => worker.send('sticky:connection', socket)); in the worker: server.emit('connection', socket); socket.resume().";

const PICK_BY_ADDRESS =
  'in the primary, pick the worker from the client\'s address alone: workers[hash(socket.remoteAddress) % workers.length], with the server created as net.createServer({ pauseOnConnect: true }, ...).';

export default {
  env: { WORKERS: String(WORKERS) },
  // Readiness probes come from several addresses, so they reach every worker.
  probeAddresses: ADDRESSES,
  // Readiness can already see the lost first bytes: say what causes them.
  acceptedButSilent:
    'Requests hang: a connection the primary accepted never reached a worker that reads it. Usually the server in the primary was created without pauseOnConnect: true, so the primary reads the first bytes of the request itself and they are lost when the socket moves to the worker.',
  before: [
    {
      id: 'client-addresses',
      title: `this machine can connect from ${ADDRESSES[0]} to ${ADDRESSES.at(-1)}`,
      async run(ctx) {
        const failure = await tryAddresses(ADDRESSES);
        if (failure) {
          ctx.fail(`The verifier cannot connect from ${failure.address} (${failure.code}), so it cannot check stickiness here.`, {
            explanation:
              `This lesson checks that each client address always reaches the same worker, so the verifier plays 16 clients, connecting from ${ADDRESSES[0]} to ${ADDRESSES.at(-1)}. ` +
              'Linux routes all of 127.0.0.0/8 to the loopback interface, but some systems (macOS, some containers) only have 127.0.0.1. ' +
              `Add the addresses to the loopback interface, then verify again. On macOS: for i in $(seq 10 25); do sudo ifconfig lo0 alias 127.0.0.$i up; done (they last until the next reboot; remove them with: sudo ifconfig lo0 -alias 127.0.0.$i).`,
            actual: failure.message,
          });
        }
        ctx.log(`${ADDRESSES.length} client addresses usable: ${ADDRESSES[0]} to ${ADDRESSES.at(-1)}`);
      },
    },
  ],
  steps: [
    {
      id: 'worker-count',
      title: `the primary has exactly ${WORKERS} workers`,
      async run(ctx) {
        await countWorkers(ctx, WORKERS, { wrongHint: 'fork Number(process.env.WORKERS) workers (lesson 2).' });
      },
    },
    {
      id: 'same-worker',
      title: `each of ${ADDRESSES.length} client addresses, over ${VISITS} fresh connections, reaches one worker and counts visits 1 to ${VISITS}`,
      timeoutMs: 15000,
      async run(ctx) {
        const workers = ctx.workers();
        setMaxListeners(ADDRESSES.length + 20, ctx.signal); // one abort listener per request in flight
        // Addresses in parallel, each one's visits one after another.
        const byAddress = new Map(
          await Promise.all(
            ADDRESSES.map(async (localAddress) => {
              const results = [];
              for (let i = 0; i < VISITS; i++) {
                const r = await ctx.request('/visits', { localAddress, timeoutMs: HANG_MS });
                results.push(r);
                if (r.code === 'TIMEOUT') break; // one hung request says enough
              }
              return [localAddress, results];
            }),
          ),
        );
        const all = [...byAddress.values()].flat();
        const hung = all.filter((r) => r.code === 'TIMEOUT');
        if (hung.length) {
          ctx.fail(`${hung.length} of ${all.length} requests hung: no answer within ${HANG_MS / 1000} s.`, {
            expected: 'every request answered',
            actual: `${hung.length} timed out, ${all.filter((r) => r.ok).length} answered`,
            explanation: `${HANGS_EXPLANATION} (Or the socket went to a worker that never passes it to its HTTP server.)`,
            reproduce: `curl -s --interface ${hung[0].localAddress} http://127.0.0.1:${ctx.port}/visits`,
            hint: HANGS_HINT,
            showOutput: true,
          });
        }
        for (const r of all) ctx.expectJson(r);
        const stranger = all.find((r) => !workers.includes(r.pid));
        if (stranger) {
          ctx.fail(`GET /visits was answered by pid ${stranger.pid}, which is not a worker.`, {
            expected: `one of the workers ${workers.join(', ')}`,
            actual: `pid ${stranger.pid}${stranger.pid === ctx.primaryPid ? ' (the primary)' : ''}`,
            hint: 'the primary only accepts connections and hands them over; the workers answer.',
          });
        }
        const wandering = [...byAddress].filter(([, results]) => new Set(results.map((r) => r.pid)).size > 1);
        if (wandering.length) {
          const [address, results] = wandering[0];
          ctx.fail(`${wandering.length} of ${ADDRESSES.length} client addresses reached different workers over ${VISITS} connections.`, {
            expected: 'each client address always served by the same worker',
            actual: `${address} was served by ${results.map((r) => r.pid).join(', ')} (visits ${results.map((r) => r.json.visits).join(', ')})`,
            explanation:
              'The worker must be chosen from what stays the same for a client: its address. With workers that listen themselves, the primary deals connections out round robin; hashing the client\'s port is no better, because every new connection comes from a new port.',
            reproduce: `for i in $(seq 5); do curl -s --interface ${address} http://127.0.0.1:${ctx.port}/visits; echo; done`,
            hint: PICK_BY_ADDRESS,
          });
        }
        const miscounted = [...byAddress].find(([, results]) => results.some((r, i) => r.json.visits !== i + 1));
        if (miscounted) {
          const [address, results] = miscounted;
          ctx.fail(`The visits of ${address} counted ${results.map((r) => JSON.stringify(r.json.visits)).join(', ')}.`, {
            expected: `1 to ${VISITS}: the GET /visits requests of this address that this worker served`,
            actual: results.map((r) => r.text).join(' '),
            explanation: 'Count per client address (req.socket.remoteAddress), in the worker, and only GET /visits requests.',
            reproduce: `for i in $(seq 5); do curl -s --interface ${address} http://127.0.0.1:${ctx.port}/visits; echo; done`,
            hint: 'const n = (visits.get(address) ?? 0) + 1; visits.set(address, n); res.json({ pid: process.pid, visits: n })',
          });
        }
        ctx.data.pidOf = new Map([...byAddress].map(([address, results]) => [address, results[0].pid]));
        ctx.log(`every address stayed on one worker: ${describeSpread(ctx.data.pidOf)}`);
      },
    },
    {
      id: 'queued-connections',
      title: `requests that wait in the primary while their worker is busy are answered`,
      timeoutMs: 30000,
      async run(ctx) {
        // The primary hands a worker one socket at a time, and the next only
        // once the worker has taken the last: while a worker is busy, the
        // connections meant for it wait in the primary. A primary that reads
        // its sockets (no pauseOnConnect) reads their requests meanwhile and
        // loses them. A worker is kept busy for certain by BATCH requests
        // pipelined on one connection (it parses them in one go); a round
        // proves the point when the requests went out before it was done.
        setMaxListeners(BEHIND + 20, ctx.signal);
        const workers = ctx.workers();
        for (let round = 1; round <= ROUNDS; round++) {
          const localAddress = ADDRESSES[round - 1];
          let open;
          const gate = new Promise((resolve) => (open = resolve));
          const held = connectionsHeld(ctx.port, workers);
          const batch = pipelined(ctx.port, '/', { count: BATCH, localAddress, timeoutMs: 20000, signal: ctx.signal, gate });
          // Its requests go out once a worker holds the connection (bounded).
          await ctx.poll(() => connectionsHeld(ctx.port, workers) > held, { timeoutMs: 2000, intervalMs: 5 });
          let batchDone = false;
          batch.then(() => (batchDone = true));
          open();
          let sent = 0;
          let busyWhenSent = false;
          const onSent = () => {
            sent += 1;
            if (sent === BEHIND) busyWhenSent = !batchDone;
          };
          const results = await Promise.all(
            Array.from({ length: BEHIND }, () => ctx.request('/', { localAddress, timeoutMs: HANG_MS, onSent })),
          );
          const batchAnswered = (await batch).filter((r) => r.ok).length;
          const failedOnes = results.filter((r) => !r.ok);
          if (failedOnes.length) {
            const hung = failedOnes.filter((r) => r.code === 'TIMEOUT').length;
            ctx.fail(`${failedOnes.length} of ${BEHIND} requests from ${localAddress} got no answer while its worker was busy.`, {
              expected: 'every request answered, however long its connection waited in the primary',
              actual: `${hung} hung for ${HANG_MS / 1000} s${failedOnes.length > hung ? `, ${failedOnes.length - hung} failed: ${failedOnes.find((r) => r.code !== 'TIMEOUT').error}` : ''}`,
              explanation: `${HANGS_EXPLANATION} Here the worker of ${localAddress} was busy with ${BATCH} requests sent on one connection, so the next connections from that address waited in the primary.`,
              reproduce:
                `(for i in $(seq ${BATCH}); do printf 'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n'; done; sleep 2) | nc -s ${localAddress} 127.0.0.1 ${ctx.port} >/dev/null & ` +
                `for i in $(seq ${BEHIND}); do curl -s -m 2 --interface ${localAddress} http://127.0.0.1:${ctx.port}/ & done; wait`,
              hint: HANGS_HINT,
              showOutput: true,
            });
          }
          for (const r of results) ctx.expectJson(r);
          ctx.log(
            `round ${round} from ${localAddress}: ${BEHIND} requests answered; they were sent ${busyWhenSent ? 'while' : 'after'} ` +
              `the worker served ${BATCH} pipelined requests (${batchAnswered} answered)`,
          );
          if (busyWhenSent) return;
        }
        ctx.log(`in ${ROUNDS} rounds the worker was never still busy when the requests went out: the check proves nothing here, and passes`);
      },
    },
    {
      id: 'spread',
      title: 'the client addresses spread over at least 2 workers',
      async run(ctx) {
        const used = new Set(ctx.data.pidOf.values());
        if (used.size < 2) {
          ctx.fail(`All ${ADDRESSES.length} client addresses reached the same worker (${[...used][0]}).`, {
            expected: `the addresses spread over at least 2 of the ${WORKERS} workers`,
            actual: describeSpread(ctx.data.pidOf),
            explanation:
              'Sticky, but not spread: whatever the primary hashes is the same for every client (the server\'s own address, socket.localAddress, or a constant), or it picks among one worker only.',
            reproduce: ADDRESSES.slice(0, 4).map((a) => `curl -s --interface ${a} http://127.0.0.1:${ctx.port}/visits`),
            hint: PICK_BY_ADDRESS,
          });
        }
        ctx.log(`${used.size} workers share the ${ADDRESSES.length} addresses`);
      },
    },
    {
      id: 'survives-kill',
      title: `after a worker is SIGKILLed, every address is served again within ${RECOVERY_MS / 1000} s, none hanging`,
      timeoutMs: 10000,
      async run(ctx) {
        const load = new Map();
        for (const pid of ctx.data.pidOf.values()) load.set(pid, (load.get(pid) ?? 0) + 1);
        const [victim] = [...load].sort((a, b) => b[1] - a[1])[0];
        const theirs = [...ctx.data.pidOf].filter(([, pid]) => pid === victim).map(([a]) => a);
        ctx.log(`worker ${victim} serves ${theirs.join(', ')}`);
        const killedAt = performance.now();
        ctx.killWorker(victim, 'SIGKILL');
        // Once the dead process is reaped (gone even as a zombie), the primary
        // has run its 'exit' handlers: from then on no connection may go to it.
        // (Before that instant nothing can know, and a socket handed to the
        // dying worker is lost: requests are only sent after it.)
        const reaped = await ctx.poll(() => isReaped(victim), { timeoutMs: 1000, intervalMs: 5 });
        if (!reaped.ok) ctx.log(`worker ${victim} is not reaped yet after 1 s (the primary has not seen its death)`);

        setMaxListeners(ADDRESSES.length + 20, ctx.signal);
        const last = new Map(); // address -> last result
        const served = new Map(); // address -> result from a live worker
        const hung = [];
        // Rounds of requests from the addresses not served yet, started within
        // RECOVERY_MS of the kill; a request that gets no answer in HANG_MS hung.
        while (served.size < ADDRESSES.length) {
          if (performance.now() - killedAt >= RECOVERY_MS || ctx.program.exited) break;
          const pending = ADDRESSES.filter((a) => !served.has(a));
          const results = await Promise.all(pending.map((localAddress) => ctx.request('/visits', { localAddress, timeoutMs: HANG_MS })));
          for (const r of results) {
            last.set(r.localAddress, r);
            if (r.code === 'TIMEOUT') hung.push(r);
            else if (r.ok && r.status === 200 && r.pid !== undefined && r.pid !== victim) served.set(r.localAddress, r);
          }
          if (served.size < ADDRESSES.length) await new Promise((resolve) => setTimeout(resolve, 20));
        }
        const ms = Math.round(performance.now() - killedAt);
        if (ctx.program.exited) {
          const { code, signal } = ctx.program.exit;
          const sentToDead = ctx.program.tail.some((l) => /ERR_IPC_CHANNEL_CLOSED|EPIPE|Channel closed/.test(l));
          ctx.fail(`The primary died after worker ${victim} was killed${sentToDead ? ': it handed a connection to the dead worker' : ''}.`, {
            expected: 'the primary keeps running and hands connections to live workers only',
            actual: signal ? `killed by ${signal}` : `exited with code ${code}`,
            explanation: sentToDead
              ? "worker.send() to a worker whose channel has closed fails with ERR_IPC_CHANNEL_CLOSED; without a callback that error is an 'error' event nobody handles, and it ends the primary. The list of workers the primary hashes over must follow deaths and replacements."
              : 'When the primary dies, the port closes and every client is refused. Its output shows why.',
            hint: "drop a worker from the list in cluster 'exit', add its replacement once it is ready, and pass a callback to worker.send(message, socket, (err) => ...).",
            outputLines: ctx.program.telltaleLines(),
          });
        }
        const unserved = ADDRESSES.filter((a) => !served.has(a));
        if (unserved.length || hung.length) {
          const outcome = (a) => {
            const r = last.get(a);
            return `${a}: ${r?.ok ? `status ${r.status}${r.pid === victim ? ' from the dead worker' : ''}` : r?.code === 'TIMEOUT' ? 'hung' : (r?.error ?? 'not tried')}`;
          };
          ctx.fail(
            unserved.length
              ? `${unserved.length} of ${ADDRESSES.length} client addresses were not served within ${RECOVERY_MS / 1000} s of the kill.`
              : `${hung.length} request(s) hung after the kill, though every address was served in the end.`,
            {
              expected: `every address served by a live worker within ${RECOVERY_MS / 1000} s, no request hanging`,
              actual: (unserved.length ? unserved : [...new Set(hung.map((r) => r.localAddress))]).slice(0, 6).map(outcome).join('; '),
              explanation:
                "Their connections still go to the dead worker: the primary's list of workers must follow deaths and replacements. Take a worker out of the list in cluster 'exit' (which fires as soon as the primary reaps the dead process; 'disconnect' can come later, and a socket sent to a dead worker is never answered), add its replacement once it is ready, and hash over the live workers only.",
              reproduce: [`kill -9 ${victim}`, `curl -s --interface ${theirs[0] ?? unserved[0]} http://127.0.0.1:${ctx.port}/visits`],
              hint: "cluster.on('exit', (worker) => { workers = workers.filter((w) => w !== worker); cluster.fork(); }), and add the new worker when it says it is ready.",
              showOutput: true,
            },
          );
        }
        ctx.log(`all ${ADDRESSES.length} addresses served by live workers ${ms} ms after the kill: ${describeSpread(new Map([...served].map(([a, r]) => [a, r.pid])))}`);
      },
    },
  ],
};

/** "101: 6 addresses, 102: 5, 103: 5" */
function describeSpread(pidOf) {
  const counts = new Map();
  for (const pid of pidOf.values()) counts.set(pid, (counts.get(pid) ?? 0) + 1);
  return [...counts].map(([pid, n]) => `${pid}: ${n} address${n === 1 ? '' : 'es'}`).join(', ');
}

/**
 * Connects once from each address to a throwaway local server; resolves the
 * first failure ({ address, code, message }) or null when all work.
 */
async function tryAddresses(addresses) {
  const server = net.createServer((socket) => socket.destroy());
  await new Promise((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  try {
    const outcomes = await Promise.all(
      addresses.map(
        (address) =>
          new Promise((resolve) => {
            const socket = net.connect({ port, host: '127.0.0.1', localAddress: address });
            const timer = setTimeout(() => done({ address, code: 'TIMEOUT', message: 'no connection within 2 s' }), 2000);
            const done = (result) => {
              clearTimeout(timer);
              socket.destroy();
              resolve(result);
            };
            socket.once('connect', () => done(null));
            socket.once('error', (err) => done({ address, code: err.code ?? 'ERROR', message: err.message }));
          }),
      ),
    );
    return outcomes.find(Boolean) ?? null;
  } finally {
    server.close();
  }
}
