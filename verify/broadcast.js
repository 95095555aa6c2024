// The broadcast lesson (broadcast): a config POSTed to any worker reaches every worker
// through the primary, within 1 s; the last of two quick updates wins; a
// replacement starts with the latest config; the primary survives sending
// after a death; a body that is not a JSON object gets 400 and changes nothing.
import { isDeepStrictEqual } from 'node:util';
import { randomUUID } from 'node:crypto';
import { countWorkers, expectPrimaryAlive, waitForReplacement } from './shared/workers.js';
import { CONVERGE_MS, converge, describeConfigs as describe, getConfig, postConfig, postLine, show } from './shared/config.js';

const WORKERS = 3;

const update = (fields) => ({ ...fields, token: randomUUID().slice(0, 8) });

export default {
  env: { WORKERS: String(WORKERS) },
  steps: [
    {
      id: 'empty-config',
      title: 'before any update, every worker answers GET /config with {}',
      async run(ctx) {
        const workers = await countWorkers(ctx, WORKERS, { wrongHint: 'fork Number(process.env.WORKERS) workers (the fork lesson), and keep them alive: if it does, the missing workers died at start-up (their error, if they printed one, is below).' });
        const answered = new Set();
        for (let i = 0; i < 30 && answered.size < workers.length; i++) {
          const r = await getConfig(ctx);
          answered.add(r.pid);
          if (!isDeepStrictEqual(r.json.config, {})) {
            ctx.fail('Before any update, a worker answered with a config that is not empty.', {
              expected: '"config": {}',
              actual: `worker ${r.pid}: ${show(r.json.config)}`,
              reproduce: ctx.curl('/config'),
              hint: 'every worker starts with an empty config, {}, until the first POST /config.',
            });
          }
        }
        ctx.log(`${answered.size} workers answer "config": {}`);
      },
    },
    {
      id: 'reaches-all',
      title: 'a config POSTed to one worker reaches all 3 within 1 s',
      async run(ctx) {
        const body = update({ color: 'blue' });
        const r = await postConfig(ctx, body);
        const seen = await converge(ctx, body);
        if (seen.ok) {
          ctx.log(`all ${WORKERS} workers answer ${JSON.stringify(body)} (${seen.ms} ms)`);
          ctx.data.config = body;
          return;
        }
        const stale = seen.workers.filter((pid) => !isDeepStrictEqual(seen.latest.get(pid), body));
        const receiverHasIt = isDeepStrictEqual(seen.latest.get(r.pid), body);
        let message;
        let explanation;
        let hint;
        if (receiverHasIt && stale.length === seen.workers.length - 1) {
          message = `The config stayed in the worker that received it (${r.pid}); the other workers still answer the old one.`;
          explanation = 'Each worker is a process of its own, with its own memory: setting a variable in one changes nothing in the others. Only messages cross: the worker tells the primary, the primary tells every worker.';
          hint = "in the worker, process.send({ type: 'set-config', config }); in the primary, cluster.on('message', (worker, msg) => ...) and worker.send(...) to every worker in cluster.workers; each worker takes it in process.on('message', ...).";
        } else if (stale.length === seen.workers.length) {
          message = 'After POST /config, no worker answers the new config.';
          explanation = 'POST /config answered, but GET /config on every worker still shows the old config.';
          hint = 'the worker that receives the POST sends it to the primary (process.send), the primary sends it to every worker, and each worker replaces its config in process.on(\'message\', ...).';
        } else {
          message = `${stale.length} of ${seen.workers.length} workers never got the new config.`;
          explanation = 'Some workers got it, some did not: the primary must send it to every worker, not only to some.';
          hint = 'iterate all workers: for (const w of Object.values(cluster.workers)) w.send(...).';
        }
        ctx.fail(message, {
          expected: `every worker answers ${JSON.stringify(body)} within ${CONVERGE_MS / 1000} s`,
          actual: describe(seen.latest, seen.workers),
          explanation,
          reproduce: [postLine(ctx, body), `for i in 1 2 3 4 5 6; do ${ctx.curl('/config')}; echo; done`],
          hint,
          showOutput: true,
        });
      },
    },
    {
      id: 'last-wins',
      title: 'two quick updates from different workers: all converge on the last',
      async run(ctx) {
        const first = update({ color: 'red', size: 'large' });
        const last = update({ color: 'green' });
        const a = await postConfig(ctx, first);
        // Round robin gives the next connection to another worker; retrying the
        // same body keeps it the last update.
        let b = await postConfig(ctx, last);
        for (let i = 0; i < 5 && b.pid === a.pid; i++) b = await postConfig(ctx, last);
        const seen = await converge(ctx, last);
        if (seen.ok) {
          ctx.log(`all ${WORKERS} workers answer the last update (${seen.ms} ms)`);
          ctx.data.config = last;
          return;
        }
        const merged = { ...first, ...last };
        const anyMerged = seen.workers.some((pid) => isDeepStrictEqual(seen.latest.get(pid), merged));
        const anyFirst = seen.workers.some((pid) => isDeepStrictEqual(seen.latest.get(pid), first));
        ctx.fail(anyMerged ? 'The two updates were merged instead of the last one replacing the config.' : 'The workers did not all end with the last update.', {
          expected: `every worker answers ${JSON.stringify(last)}`,
          actual: describe(seen.latest, seen.workers),
          explanation: anyMerged
            ? 'POST /config replaces the whole config; it does not add to it. Object.assign/spread kept "size" from the first update.'
            : anyFirst
              ? 'Some workers ended with the first update: the last message the primary sends must be the last update it received, and each worker must take every message it gets.'
              : 'Every update replaces the config of every worker; after two updates all of them answer the second.',
          reproduce: [postLine(ctx, first), postLine(ctx, last), `for i in 1 2 3 4 5 6; do ${ctx.curl('/config')}; echo; done`],
          hint: anyMerged ? 'replace: config = message.config, not Object.assign(config, message.config).' : 'the primary keeps the config it received last and sends exactly that to every worker.',
        });
      },
    },
    {
      id: 'replacement-latest',
      title: 'a replacement for a SIGKILLed worker starts with the latest config',
      async run(ctx) {
        const latest = ctx.data.config;
        const before = ctx.workers();
        const [victim] = before;
        ctx.killWorker(victim, 'SIGKILL');
        await waitForReplacement(ctx, WORKERS, [victim]);
        const fresh = ctx.workers().filter((pid) => !before.includes(pid));
        ctx.log(`worker ${victim} replaced by ${fresh.join(', ')}`);
        const seen = await converge(ctx, latest, { when: 'after a worker died' });
        if (!seen.ok) {
          const got = fresh.map((pid) => `worker ${pid} (the replacement): ${seen.latest.has(pid) ? show(seen.latest.get(pid)) : '(never answered)'}`);
          ctx.fail('The replacement worker does not have the latest config.', {
            expected: `every worker, the replacement too, answers ${JSON.stringify(latest)}`,
            actual: `${got.join('; ')}; all: ${describe(seen.latest, seen.workers)}`,
            explanation:
              'A new worker must start with the config the primary holds now, and this one did not get it. The usual causes: ' +
              'the primary sends updates only to the workers alive at the time, and nothing to a worker forked later; ' +
              "or it sends the config before the new worker's process.on('message') listener exists, and a message nobody listens to is dropped: " +
              "right after cluster.fork() or on 'online' an ES module worker is still loading its imports, and any worker whose listener is set late (in a listen callback, after an await) misses what came before; " +
              'or the worker receives it but does not take it as its config.',
            reproduce: [`kill -9 ${victim}`, `for i in 1 2 3 4 5 6; do ${ctx.curl('/config')}; echo; done`],
            hint: "fork with it: cluster.fork({ CONFIG: JSON.stringify(config) }) and JSON.parse(process.env.CONFIG) in the worker (nothing can be lost); or send it in cluster.on('listening', (worker) => worker.send(...)), when the worker's code has run.",
            showOutput: true,
          });
        }
        ctx.log(`the replacement answers ${JSON.stringify(latest)}`);
      },
    },
    {
      id: 'update-after-death',
      title: 'an update after a worker died reaches every worker, and the primary survives',
      async run(ctx) {
        const body = update({ color: 'purple' });
        await postConfig(ctx, body);
        const seen = await converge(ctx, body, { when: 'while sending a config after a worker had died' });
        expectPrimaryAlive(ctx, 'after the update');
        if (!seen.ok) {
          ctx.fail('An update after a worker died did not reach every worker.', {
            expected: `every worker answers ${JSON.stringify(body)}`,
            actual: describe(seen.latest, seen.workers),
            explanation: 'The primary must send each update to the workers alive now, replacements included. A list of workers made at start-up misses the replacements.',
            hint: 'iterate Object.values(cluster.workers) at the moment of the update: it holds exactly the live workers.',
            showOutput: true,
          });
        }
        ctx.data.config = body;
        ctx.log(`all ${WORKERS} workers answer ${JSON.stringify(body)} (${seen.ms} ms)`);
      },
    },
    {
      id: 'rejects-malformed',
      title: 'a body that is not a JSON object gets 400 and changes nothing',
      async run(ctx) {
        const latest = ctx.data.config;
        // Each body with how the message names it: the first is JSON cut short on
        // purpose, and quoted bare it read as the message's own words cut mid-word.
        const bodies = [
          ['{"color": "bro', "the JSON cut short '{\"color\": \"bro'"],
          ['[1, 2, 3]', "the array '[1, 2, 3]'"],
          ['"just a string"', "the string '\"just a string\"'"],
          ['null', "the body 'null'"],
        ];
        for (const [body, named] of bodies) {
          const r = await ctx.request('/config', { method: 'POST', body, timeoutMs: 3000 });
          const reproduce = `curl -s -X POST -H 'content-type: application/json' -d '${body}' http://127.0.0.1:${ctx.port}/config`;
          if (r.ok && r.status !== 400) {
            ctx.fail(`POST /config with ${named} answered status ${r.status}.`, {
              expected: 'status 400: the body is not a JSON object',
              actual: `status ${r.status}, body ${r.text.slice(0, 200)}`,
              explanation: body.startsWith('[')
                ? 'An array is valid JSON, and typeof [] is "object" too, but it is not a config object.'
                : 'Only a JSON object ({...}) is a config; anything else is refused with 400.',
              reproduce,
              hint: "if (typeof body !== 'object' || body === null || Array.isArray(body)) return res.status(400).json({ pid: process.pid, error: '...' }).",
            });
          }
          if (r.ok && r.status === 400 && r.pid === undefined) {
            ctx.fail(`POST /config with ${named} answered 400, but not JSON with "pid".`, {
              expected: 'status 400 with a JSON body such as { "pid": 1234, "error": "..." }',
              actual: `body ${r.text.slice(0, 200)}`,
              explanation: "express.json() passes a body it cannot parse to express's default error handler, which answers an HTML page. Every response carries pid, errors too.",
              reproduce,
              hint: 'add an error handler after your routes: app.use((err, req, res, next) => res.status(err.status ?? 500).json({ pid: process.pid, error: err.message })).',
            });
          }
          ctx.expectJson(r, { status: 400 });
        }
        ctx.log('broken JSON, an array, a string and null each got 400');
        // Ask every worker twice: a wrong broadcast takes a few ms to arrive.
        const asked = new Map();
        for (let i = 0; i < 40 && ctx.workers().some((pid) => (asked.get(pid) ?? 0) < 2); i++) {
          const r = await getConfig(ctx);
          asked.set(r.pid, (asked.get(r.pid) ?? 0) + 1);
          if (!isDeepStrictEqual(r.json.config, latest)) {
            ctx.fail('A refused body changed the config.', {
              expected: `every worker still answers ${JSON.stringify(latest)}`,
              actual: `worker ${r.pid}: ${show(r.json.config)}`,
              explanation: 'A body that got 400 must not reach the primary: check it before process.send.',
              reproduce: ctx.curl('/config'),
            });
          }
        }
        ctx.log(`every worker still answers ${JSON.stringify(latest)}`);
      },
    },
  ],
};
