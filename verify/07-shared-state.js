// Lesson 7 (shared-state): one cluster-wide counter held by the primary.
// 300 concurrent increments over fresh connections answer exactly 1..300;
// every worker then reads 300; a SIGKILLed worker takes nothing with it.
import { countWorkers, waitForReplacement } from './shared/workers.js';
import { expectUniqueIncrements, expectCountEverywhere } from './shared/counter.js';

const WORKERS = 3;
const TOTAL = 300;

const ASK_WITH_ID =
  'give every question to the primary an id (process.send({ type, op, id })), have the primary send it back with the count, and resolve the request whose id comes back (a Map from id to resolve).';

const causes = {
  perWorker: {
    explanation:
      'A variable in a worker lives in that worker\'s memory only: three workers, three counters. Workers share no memory; the one process they all talk to is the primary.',
    hint: 'keep `let count = 0` in the primary; a worker asks it with process.send() and answers with the value the primary sends back.',
  },
  duplicates: ({ samePid, crossPid }) => {
    const unmatched =
      'Replies are not matched to requests: while several requests wait in one worker, one reply from the primary is taken by more than one of them (every process.once("message") listener fires on the next message), so two requests answer the same value and other replies are lost.';
    const heard =
      'A worker answered with a total it heard (a broadcast, or the last value it kept), not with the reply to its own increment: two workers, or two requests, then answer the same total.';
    return {
      explanation: samePid && !crossPid ? `${unmatched} (Or: ${lower(heard)})` : `${heard} (Or: ${lower(unmatched)})`,
      hint: ASK_WITH_ID,
    };
  },
  noAnswer: {
    explanation:
      'A request waits for the primary\'s reply to its own question. When a reply is given to the wrong request, or kept in one shared variable that the next request overwrites, the request it belonged to waits forever: replies are not matched to requests.',
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
        await countWorkers(ctx, WORKERS, { wrongHint: 'fork Number(process.env.WORKERS) workers (lesson 2).' });
      },
    },
    {
      id: 'unique-increments',
      title: `${TOTAL} concurrent POST /count answer exactly 1 to ${TOTAL}, each once`,
      timeoutMs: 20000,
      async run(ctx) {
        await expectUniqueIncrements(ctx, { total: TOTAL, causes });
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
