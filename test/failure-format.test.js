// "To see it yourself" lines are pasted into a shell: every URL is quoted
// (zsh, the macOS default, stops at an unquoted `?` with "no matches found"),
// and a pid of the run that just ended is either $pid, set by the start line,
// or said to be from that run. Checked on formatFailure, which every
// verifier's failures go through, and on a real failing verify.
import { join } from 'node:path';
import { StepFailure, formatFailure } from '../lib/harness/failure.js';
import { verifyFile } from './helpers/verify.js';
import { FIXTURES_DIR } from './helpers/fixtures.js';

const reproduceOf = (text) => text.split('to see it yourself:\n')[1].split('\n').filter((l) => l.startsWith('    ')).map((l) => l.trim());

test('URLs are quoted, the primary pid becomes $pid from the start line, other pids are said to be from the run', () => {
  const failure = new StepFailure('a worker was not replaced', {
    reproduce: ['curl -s http://127.0.0.1:4100/heavy?ms=20 &', 'kill -USR2 4242', 'pgrep -P 4242', 'kill -9 4250', "curl -s 'http://127.0.0.1:4100/already'"],
  });
  const cmds = reproduceOf(formatFailure(failure, { commandLine: 'PORT=4100 node server.js', primaryPid: 4242 }));
  expect(cmds).toEqual([
    'PORT=4100 node server.js & pid=$!',
    "curl -s 'http://127.0.0.1:4100/heavy?ms=20' &",
    'kill -USR2 $pid',
    'pgrep -P $pid',
    'kill -9 4250',
    "curl -s 'http://127.0.0.1:4100/already'",
    '# the pids above are from the run that just ended: yours will differ',
  ]);
});

test("a URL ends where the shell's word ends: a ; after it stays outside the quotes, a query's & inside", () => {
  const failure = new StepFailure('x', { reproduce: ['for i in $(seq 6); do curl -s -X POST http://127.0.0.1:4100/count; echo; done', 'curl -s http://127.0.0.1:4100/a?x=1&y=2 &'] });
  const cmds = reproduceOf(formatFailure(failure, { commandLine: 'PORT=4100 node server.js', primaryPid: 1 }));
  expect(cmds.slice(1)).toEqual([
    "for i in $(seq 6); do curl -s -X POST 'http://127.0.0.1:4100/count'; echo; done",
    "curl -s 'http://127.0.0.1:4100/a?x=1&y=2' &",
  ]);
});

test('without pids, the start line is as before and no note is added', () => {
  const cmds = reproduceOf(formatFailure(new StepFailure('x', { reproduce: 'curl -s http://127.0.0.1:4100/' }), { commandLine: 'PORT=4100 node server.js', primaryPid: 1 }));
  expect(cmds).toEqual(['PORT=4100 node server.js &', "curl -s 'http://127.0.0.1:4100/'"]);
});

test('a real failure: its commands have no unquoted ? (the glob zsh refuses)', async () => {
  const { failedStep, log } = await verifyFile('bottleneck', join(FIXTURES_DIR, 'bottleneck', 'heavy-on-a-timer.js'));
  expect({ step: failedStep?.id, log: log.slice(-400) }).toMatchObject({ step: 'heavy-blocks' });
  const cmds = reproduceOf(failedStep.detail);
  expect(cmds.join('\n')).toMatch(/'http:\/\/127\.0\.0\.1:\d+\/heavy\?ms=\d+'/);
  const unquoted = cmds.map((cmd) => cmd.replace(/'[^']*'|"[^"]*"/g, ''));
  expect(unquoted.filter((c) => /[?*]/.test(c))).toEqual([]);
});

test('a real failure of a lesson that quotes its own curl line: still one pair of quotes, no unquoted ?', async () => {
  const { failedStep, log } = await verifyFile('graceful-shutdown', join(FIXTURES_DIR, 'graceful-shutdown', 'no-handler.js'));
  expect({ step: failedStep?.id, log: log.slice(-400) }).toMatchObject({ step: 'sigterm-in-flight' });
  const cmds = reproduceOf(failedStep.detail);
  expect(cmds.join('\n')).toMatch(/curl -s 'http:\/\/127\.0\.0\.1:\d+\/slow\?ms=1000' &/);
  const unquoted = cmds.map((cmd) => cmd.replace(/'[^']*'|"[^"]*"/g, ''));
  expect(unquoted.filter((c) => /[?*]/.test(c))).toEqual([]);
});
