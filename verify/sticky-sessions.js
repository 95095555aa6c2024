// The sticky-sessions lesson (sticky-sessions): the primary routes each client address to one
// worker. From 16 client addresses (127.0.0.10 to .25, bound with
// localAddress): each address always reaches the same worker and its visits
// count 1..5 there; the addresses spread over several workers; after a worker
// is SIGKILLed, every address is served again within 2 s and none hangs; and
// after 2 deaths in a row and then all 3 workers killed at once, the
// replacements join the balancer and serve their share of the addresses,
// losing no connection while they join (traffic from every address runs
// throughout; with every worker dead the connections wait in the primary, so
// a replacement that is handed sockets before it listens for them certainly
// loses some).
import { setMaxListeners } from 'node:events';
import { countWorkers, expectPrimaryAlive } from './shared/workers.js';
import { isReaped } from '../lib/harness/processes.js';
import { failed, summarizeFailures } from '../lib/harness/load.js';
import { connectionsHeld } from '../lib/harness/sockets.js';
import { pipelined } from '../lib/harness/pipelined.js';
import { tryAddresses } from './shared/addresses.js';

const WORKERS = 3;
const ADDRESSES = Array.from({ length: 16 }, (_, i) => `127.0.0.${10 + i}`);
const VISITS = 5;
const RECOVERY_MS = 2000;
const HANG_MS = 2000;
// The replacement-joins check: single deaths in a row before all workers die
// at once, and how long after the reap a replacement may take to serve.
const SINGLE_DEATHS = 2;
const JOIN_MS = 5000;
// The queued-connections check: requests pipelined on one connection to keep
// a worker busy, the requests that wait in the primary meanwhile, and how many
// rounds (one address each) may run until one proves the point.
const BATCH = 1500;
const BEHIND = 5;
const ROUNDS = 5;
const HANGS_EXPLANATION =
  'A connection the primary accepted never reached a worker that reads it. Usually the server in the primary was created without pauseOnConnect: true, so the primary reads the first bytes of the request itself, and those bytes are lost when the socket moves to the worker, which then waits forever for a request.';
// The failures' hints say where to look, never the code: the lesson's graded
// hints (cluster-workshop hint) are the ladder to it.
const HANGS_HINT =
  'the primary accepts each connection without reading from it (pauseOnConnect) and hands the socket to a worker, whose http server must be given it and must resume it.';

const PICK_BY_ADDRESS =
  "in the primary, choose the worker from what stays the same for a client from one connection to the next: its address, never its port or whose turn it is.";

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
        await countWorkers(ctx, WORKERS, { wrongHint: 'fork Number(process.env.WORKERS) workers (the fork lesson), and keep them alive: if it does, the missing workers died at start-up (their error, if they printed one, is below).' });
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
          // They wait as long as the busy worker takes (a slow machine takes
          // seconds for the batch): a request hung when it is still without an
          // answer HANG_MS after the worker finished the batch.
          const giveUp = new AbortController();
          const signal = AbortSignal.any([ctx.signal, giveUp.signal]);
          const waiting = Array.from({ length: BEHIND }, () => ctx.request('/', { localAddress, timeoutMs: 30000, onSent, signal }));
          const batchAnswered = (await batch).filter((r) => r.ok).length;
          const hangTimer = setTimeout(() => giveUp.abort(), HANG_MS);
          const results = await Promise.all(waiting);
          clearTimeout(hangTimer);
          const failedOnes = results.filter((r) => !r.ok);
          if (failedOnes.length) {
            const isHung = (r) => r.code === 'TIMEOUT' || r.code === 'ABORTED';
            const hung = failedOnes.filter(isHung).length;
            ctx.fail(`${failedOnes.length} of ${BEHIND} requests from ${localAddress} got no answer while its worker was busy.`, {
              expected: 'every request answered, however long its connection waited in the primary',
              actual: `${hung} still without an answer ${HANG_MS / 1000} s after the worker finished the batch${failedOnes.length > hung ? `, ${failedOnes.length - hung} failed: ${failedOnes.find((r) => !isHung(r)).error}` : ''}`,
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
                "The usual cause: their connections still go to the dead worker, because the primary's list of workers does not follow deaths. Take a worker out of the list on 'exit' or 'disconnect', whichever comes first ('exit' fires as soon as the primary reaps the dead process; 'disconnect' may come later or not at all, and a socket sent to a dead worker is never answered), add its replacement once it is ready, and hash over the live workers only. " +
                "(Or the connections went to a replacement before it listened for sockets: see the replacement-joins step.)",
              reproduce: [`kill -9 ${victim}`, `curl -s --interface ${theirs[0] ?? unserved[0]} http://127.0.0.1:${ctx.port}/visits`],
              hint: "cluster.on('exit', (worker) => { workers = workers.filter((w) => w !== worker); cluster.fork(); }), and add the new worker when it says it is ready.",
              showOutput: true,
            },
          );
        }
        ctx.log(`all ${ADDRESSES.length} addresses served by live workers ${ms} ms after the kill: ${describeSpread(new Map([...served].map(([a, r]) => [a, r.pid])))}`);
      },
    },
    {
      id: 'replacement-joins',
      title: `after ${SINGLE_DEATHS} deaths in a row, then all ${WORKERS} workers at once, the replacements serve their share of the ${ADDRESSES.length} addresses, and no request is lost while they join`,
      timeoutMs: 40000,
      async run(ctx) {
        // Two requests in flight per address, and the sweeps: one abort listener each.
        setMaxListeners(3 * ADDRESSES.length + 20, ctx.signal);
        const rounds = [...Array.from({ length: SINGLE_DEATHS }, () => 1), WORKERS];
        for (const [index, deaths] of rounds.entries()) {
          const round = deaths === 1 ? `death ${index + 1} of ${SINGLE_DEATHS}` : `all ${WORKERS} workers killed at once`;
          const settled = await ctx.waitForWorkers(WORKERS, { timeoutMs: 2000 });
          if (!settled.ok) {
            expectPrimaryAlive(ctx, 'while its workers were being replaced');
            ctx.fail(`Found ${settled.value.length} workers before the next kill (${round}), WORKERS=${WORKERS}.`, {
              expected: `exactly ${WORKERS} workers, a replacement for each that died`,
              actual: `${settled.value.length}: ${settled.value.join(', ')}`,
              hint: "cluster.on('exit', () => cluster.fork()): one replacement per death.",
              showOutput: true,
            });
          }
          const before = settled.value;
          const spread = await sweep(ctx);
          const victims = deaths === 1 ? [busiest(spread, before)[0]] : before;
          const share = [...spread.values()].filter((pid) => victims.includes(pid)).length;
          ctx.log(`${round}: ${describeSpread(spread)}; killing ${victims.join(', ')}`);
          for (const pid of victims) ctx.killWorker(pid, 'SIGKILL');
          // Until the primary reaped the dead, a connection may still go to
          // them (nothing can know yet); the traffic starts once it has, and
          // from then on no request may be lost.
          await ctx.poll(() => victims.every(isReaped), { timeoutMs: 1000, intervalMs: 5 });
          const reapedAt = performance.now();
          // Traffic from every address runs until the replacements serve: the
          // primary hands a replacement its first sockets the moment it adds
          // it to its list, whenever that is. With every worker dead, the
          // connections wait in the primary and go to the first replacement
          // the instant it joins: one that joins before it listens for sockets
          // certainly loses some.
          const timeoutMs = deaths === 1 ? HANG_MS : JOIN_MS + HANG_MS;
          const loads = ADDRESSES.map((localAddress) => ctx.startLoad({ path: '/', concurrency: 2, timeoutMs, localAddress }));
          const replaced = await ctx.waitForWorkers(WORKERS, { timeoutMs: 2000, accept: (pids) => victims.every((v) => !pids.includes(v)) });
          const fresh = replaced.value.filter((pid) => !before.includes(pid));
          // Joined: as many workers serve the addresses as before the kill
          // (a hash may leave a worker without an address; it stays so).
          const wanted = new Set(spread.values()).size;
          const servingSinceReap = () =>
            new Set(loads.flatMap((l) => l.results).filter((r) => r.start > reapedAt && r.ok && r.pid !== undefined && !victims.includes(r.pid)).map((r) => r.pid));
          const joined = replaced.ok ? await ctx.poll(() => servingSinceReap().size >= wanted, { timeoutMs: JOIN_MS, intervalMs: 10 }) : { ok: false };
          const results = (await Promise.all(loads.map((l) => l.stop()))).flat();
          expectPrimaryAlive(ctx, `after ${victims.length > 1 ? 'its workers were' : `worker ${victims[0]} was`} killed`);
          if (!replaced.ok) {
            ctx.fail(`${victims.length > 1 ? `Workers ${victims.join(', ')} were` : `Worker ${victims[0]} was`} not replaced within 2 s (${round}).`, {
              expected: `exactly ${WORKERS} workers, none of them ${victims.join(', ')}`,
              actual: `${replaced.value.length}: ${replaced.value.join(', ') || 'none'}`,
              hint: "cluster.on('exit', () => cluster.fork()): one replacement per death.",
              showOutput: true,
            });
          }
          const afterReap = results.filter((r) => r.start > reapedAt);
          const lost = afterReap.filter(failed);
          if (lost.length) {
            const hung = lost.filter((r) => r.code === 'TIMEOUT').length;
            const addresses = [...new Set(lost.map((r) => r.localAddress))];
            ctx.fail(`${lost.length} of ${afterReap.length} requests sent after the primary reaped ${victims.length > 1 ? 'the dead workers' : `worker ${victims[0]}`} got no answer (${round}).`, {
              expected:
                deaths === 1
                  ? 'every request answered, by a survivor or by the replacement'
                  : 'every request answered: with no worker alive, connections wait in the primary until a replacement is ready',
              actual: `${summarizeFailures(afterReap)}${hung ? ` (no answer within ${timeoutMs / 1000} s)` : ''}, from ${addresses.slice(0, 6).join(', ')}${addresses.length > 6 ? ', ...' : ''}`,
              explanation:
                'A connection the primary accepted never reached a worker that reads it. The usual causes: ' +
                "(1) the primary hands a replacement sockets before it listens for them: a socket that arrives before the worker's process.on('message') listener exists goes to no listener and is never answered. " +
                "A worker added to the list on cluster 'online', or as soon as it is forked, is there too early when it is an ES module: its imports load over several turns of the event loop after 'online' (a CommonJS worker sets its listener before it reads any message). " +
                "(2) Sockets still go to a dead worker after the primary reaped it: drop it from the list in cluster 'exit'. " +
                '(3) With no worker ready, the primary closed the connection or lost it, instead of keeping it until a replacement is ready.',
              reproduce: [
                `for a in $(seq 10 25); do (while true; do curl -s -m 5 --interface 127.0.0.$a http://127.0.0.1:${ctx.port}/ >/dev/null || echo "127.0.0.$a: no answer"; done) & done`,
                `kill -9 ${victims.join(' ')}   # watch for "no answer" while the replacements start; end the loops with: kill $(jobs -p)`,
              ],
              hint: "have each worker say when it is ready (process.send('sticky:ready') after process.on('message', ...) is set) and add it to the list on that message; keep the connections that arrive while no worker is ready in an array, and hand them over once one is.",
              showOutput: true,
            });
          }
          if (!joined.ok) {
            const serving = servingSinceReap();
            const silent = fresh.filter((pid) => !serving.has(pid));
            ctx.fail(
              `Replacement ${silent.join(', ') || fresh.join(', ')} never served any of the ${ADDRESSES.length} addresses within ${JOIN_MS / 1000} s of its start (${round}).`,
              {
                expected: `every replacement takes its share of the addresses once it is ready (the ${deaths === 1 ? 'worker it replaced' : 'workers they replaced'} had ${share} of ${ADDRESSES.length})`,
                actual: `the addresses were served by: ${describeSpread(lastPidOf(results))}`,
                explanation:
                  `The replacement runs, but the primary never hands it a connection: it never joined the primary's list of live workers. After each death fewer workers share the addresses; after ${WORKERS} deaths none is served while ${WORKERS} workers run. ` +
                  'The list must take in every worker that says it is ready, replacements too, not only the first ones.',
                reproduce: [
                  `kill -9 ${victims.join(' ')}`,
                  `for a in $(seq 10 25); do curl -s -m 2 --interface 127.0.0.$a http://127.0.0.1:${ctx.port}/; echo; done   # the new pid never answers`,
                ],
                hint: "add a worker to the list on its 'sticky:ready' message, for every worker, replacements included: cluster.on('message', (worker, message) => ...).",
                showOutput: true,
              },
            );
          }
          ctx.log(`${round}: replacement${fresh.length > 1 ? 's' : ''} ${fresh.join(', ')} served ${joined.ms} ms after the reap; ${afterReap.length} requests since then, none lost`);
        }
        ctx.log(`after the deaths: ${describeSpread(await sweep(ctx))}`);
      },
    },
  ],
};

/**
 * One request from each address at once; resolves Map(address -> pid) of
 * those answered. Requests that fail here are judged by the step that
 * caused them (the previous death), not by the sweep.
 */
async function sweep(ctx) {
  const results = await Promise.all(ADDRESSES.map((localAddress) => ctx.request('/', { localAddress, timeoutMs: HANG_MS })));
  return new Map(results.filter((r) => r.ok && r.pid !== undefined).map((r) => [r.localAddress, r.pid]));
}

/** The pid serving the most addresses (among the live ones), and its count. */
function busiest(pidOf, live) {
  const counts = new Map(live.map((pid) => [pid, 0]));
  for (const pid of pidOf.values()) if (counts.has(pid)) counts.set(pid, counts.get(pid) + 1);
  return [...counts].sort((a, b) => b[1] - a[1])[0];
}

/** Map(address -> pid) of the latest answered request of each address. */
function lastPidOf(results) {
  const last = new Map();
  for (const r of [...results].sort((a, b) => a.end - b.end)) if (r.ok && r.pid !== undefined) last.set(r.localAddress, r.pid);
  return last;
}

/** "101: 6 addresses, 102: 5, 103: 5" */
function describeSpread(pidOf) {
  const counts = new Map();
  for (const pid of pidOf.values()) counts.set(pid, (counts.get(pid) ?? 0) + 1);
  return [...counts].map(([pid, n]) => `${pid}: ${n} address${n === 1 ? '' : 'es'}`).join(', ');
}
