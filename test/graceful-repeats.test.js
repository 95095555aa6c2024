// graceful-shutdown's killed-worker-again step starts the program again and
// judges every start: a program that crashes on one later start only (here
// the 3rd of the 5 repeats, counted in a file) fails there, and is told which
// start it was. Without the step, this program passes.
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { verifyFile, verdictOf, failedAt, leftovers } from './helpers/verify.js';
import { FixturePrograms, FIXTURES_DIR } from './helpers/fixtures.js';

const programs = new FixturePrograms();
const dir = mkdtempSync(join(tmpdir(), 'cw-sigterm-count-'));
afterAll(() => {
  programs.cleanup();
  rmSync(dir, { recursive: true, force: true });
  delete process.env.SIGTERM_COUNT_FILE;
});

test('a crash on the 3rd repeated start fails killed-worker-again, and the message says which start', async () => {
  const countFile = join(dir, 'count');
  process.env.SIGTERM_COUNT_FILE = countFile; // the program inherits the test's environment
  const result = await verifyFile('graceful-shutdown', programs.programOf(join(FIXTURES_DIR, 'harness', 'crashes-on-sixth-sigterm.js')));
  expect(verdictOf(result)).toMatch(failedAt('killed-worker-again'));
  expect(result.failedStep.detail).toMatch(/exited with code 1 after SIGTERM to the primary as a worker is killed \(on repeat 3 of 5;/);
  // The 6th SIGTERM crashed the 3rd repeat. The start the verifier had
  // already booted for the 4th is ended by the teardown, with SIGTERM to the
  // group and to each process: when its handler was up by then (timing), it
  // counts those 2 as well.
  expect([6, 8]).toContain(Number(readFileSync(countFile, 'utf8')));
  expect(leftovers()).toEqual([]);
});
