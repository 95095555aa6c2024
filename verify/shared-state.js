// The shared-state lesson (shared-state): one cluster-wide counter held by the primary.
// 300 concurrent increments over fresh connections answer exactly 1..300;
// every worker then reads 300; a SIGKILLed worker takes nothing with it.
import { countWorkers, waitForReplacement } from './shared/workers.js';
import { expectUniqueIncrements, expectCountEverywhere } from './shared/counter.js';

const WORKERS = 3;
const TOTAL = 300;

const ASK_WITH_ID =
  'give every question to the primary an id (process.send({ type, op, id })); the primary answers the worker that asked, the one its cluster.on(\'message\', (worker, message) => ...) handler names, with worker.send({ id: message.id, count }); the worker resolves the request whose id comes back (a Map from id to resolve).';
// A reply reaches the wrong request in one of two ways; which one, the
// answers alone cannot tell.
const MISMATCHED_REPLIES =
  'Replies are not matched to requests. The usual causes: the worker does not tell its waiting requests apart (no id, an id that is not unique such as Date.now(), or a process.once("message") listener per request: every listener fires on the next message); ' +
  'or the primary sends a reply to another worker than the one that asked (a worker it remembered from an earlier message, the last one that asked, or every worker), where an id from another worker can match a request it did not answer.';

const causes = {
  perWorker: {
    explanation:
      'A variable in a worker lives in that worker\'s memory only: three workers, three counters. Workers share no memory; the one process they all talk to is the primary.',
    hint: 'keep `let count = 0` in the primary; a worker asks it with process.send() and answers with the value the primary sends back.',
  },
  duplicates: ({ samePid, crossPid }) => {
    const unmatched = `${MISMATCHED_REPLIES} Two requests then answer the same value, and other replies are lost.`;
    const heard =
      "A worker answered a total it heard or read apart from its own increment (a broadcast, the last value it kept, or a second question, a 'get' after the 'add'), not the value the primary returned for that increment: two workers, or two requests, then answer the same total.";
    return {
      explanation: samePid && !crossPid ? `${unmatched} (Or: ${lower(heard)})` : `${heard} (Or: ${lower(unmatched)})`,
      hint: ASK_WITH_ID,
    };
  },
  mismatched: {
    explanation: `The count lives in the primary, but each worker's k-th question got the first reply numbered k, whoever asked it. ${MISMATCHED_REPLIES}`,
    hint: ASK_WITH_ID,
  },
  noAnswer: {
    explanation: `A request waits for the primary's reply to its own question, and some never got it. ${MISMATCHED_REPLIES} (Or the reply is kept in one shared variable that the next request overwrites.)`,
    hint: ASK_WITH_ID,
  },
};

const fromWorkerMemory = {
  explanation:
    'GET /count must read the primary\'s count; a worker that answers from its own memory only knows the increments it served (or heard about).',
  hint: 'GET /count asks the primary too (process.send({ type, op: "get", id })) and answers its reply.',
};

const lower = (text) => text[0].toLowerCase() + text.slice(1);

export default {
  env: { WORKERS: String(WORKERS) },
  steps: [
    {
      id: 'worker-count',
      title: `the primary has exactly ${WORKERS} workers`,
      async run(ctx) {
        await countWorkers(ctx, WORKERS, { wrongHint: 'fork Number(process.env.WORKERS) workers (the fork lesson), and keep them alive: if it does, the missing workers died at start-up (their error, if they printed one, is below).' });
      },
    },
    {
      id: 'unique-increments',
      title: `${TOTAL} concurrent POST /count answer exactly 1 to ${TOTAL}, each once`,
      timeoutMs: 20000,
      async run(ctx) {
        await expectUniqueIncrements(ctx, { total: TOTAL, causes, holdPrimary: true });
      },
    },
    {
      id: 'read-everywhere',
      title: `GET /count answers ${TOTAL} from every worker`,
      async run(ctx) {
        await expectCountEverywhere(ctx, TOTAL, { cause: fromWorkerMemory });
      },
    },
    {
      id: 'survives-worker-death',
      title: `after a worker is SIGKILLed, the count is still ${TOTAL} and the next POST answers ${TOTAL + 1}`,
      async run(ctx) {
        const before = ctx.workers();
        const [victim] = before;
        ctx.killWorker(victim, 'SIGKILL');
        const after = await waitForReplacement(ctx, WORKERS, [victim]);
        ctx.log(`worker ${victim} replaced by ${after.filter((pid) => !before.includes(pid)).join(', ')}`);
        await expectCountEverywhere(ctx, TOTAL, {
          when: ` after worker ${victim} died`,
          cause: {
            explanation:
              'The count must live in the primary, which outlives every worker. A count kept in a worker (or copied into a new worker as 0) is lost with it.',
            hint: 'keep the count in the primary only; the replacement worker asks the primary like the others.',
          },
        });
        const r = await ctx.get('/count', { method: 'POST' });
        if (r.json.count !== TOTAL + 1) {
          ctx.fail(`The next POST /count answered ${JSON.stringify(r.json.count)}.`, {
            expected: `"count": ${TOTAL + 1}`,
            actual: r.text,
            reproduce: ctx.curl('/count', { method: 'POST' }),
            hint: 'the primary adds one to the count it kept through the worker\'s death.',
          });
        }
        ctx.log(`POST /count -> ${r.text}`);
      },
    },
  ],
};
