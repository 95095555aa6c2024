// A step that is interrupted (Ctrl-C) or times out still runs in the
// background. Whatever it opens on its way out (a Redis client it keeps in
// ctx.data) must reach the teardown, or the verifier never exits: the runner
// lets it settle, within a bound, before it tears down.
import { setTimeout as sleep } from 'node:timers/promises';
import { runVerifier } from '../lib/harness/runner.js';

const lesson = { id: 'harness', number: 0, title: 'harness test' };

function verifierThatOpensLate(openAfterMs, seen) {
  return {
    clustered: false,
    before: [
      {
        id: 'opens-late',
        title: 'opens something after a while, deaf to the abort',
        timeoutMs: 5000,
        async run(ctx) {
          await sleep(openAfterMs);
          ctx.data.opened = true;
        },
      },
    ],
    steps: [],
    teardown: async (ctx) => {
      seen.push(ctx.data.opened === true);
    },
  };
}

test('Ctrl-C during a step: the teardown sees what the step opened after the signal', async () => {
  const seen = [];
  const controller = new AbortController();
  setTimeout(() => controller.abort('SIGINT'), 50);
  const report = await runVerifier({ lesson, file: '/nonexistent.js', verifier: verifierThatOpensLate(400, seen), signal: controller.signal });
  expect(report.interrupted).toBe('SIGINT');
  expect(seen).toEqual([true]);
});

test('a step that takes longer than the grace does not hold the teardown back', async () => {
  const seen = [];
  const controller = new AbortController();
  setTimeout(() => controller.abort('SIGINT'), 50);
  const report = await runVerifier({ lesson, file: '/nonexistent.js', verifier: verifierThatOpensLate(3500, seen), signal: controller.signal });
  expect(report.interrupted).toBe('SIGINT');
  expect(seen).toEqual([false]); // torn down before the step got there
  await sleep(1600); // the step ends before the test does
});
