// isReaped() (lib/harness/processes.js): a dead process stays in the table as
// a zombie until its parent collects it, and only then is it reaped. The
// verifiers time "the primary has seen the death" from this, since a cluster
// primary may hand a connection to a dead worker it has not reaped yet.
import { spawn } from 'node:child_process';
import { isAlive, isReaped } from '../lib/harness/processes.js';
import { until } from './helpers/until.js';

// A parent that forks a child which exits at once, prints its pid, and reaps
// it only when told to (a line on stdin). Perl: its fork does not reap on its
// own, unlike Node's child_process.
const PARENT = '$| = 1; my $pid = fork() // die; exit 0 unless $pid; print "$pid\\n"; <STDIN>; waitpid($pid, 0); print "reaped\\n"; <STDIN>;';

test('a dead child is not reaped until its parent collects it', async () => {
  const parent = spawn('perl', ['-e', PARENT], { stdio: ['pipe', 'pipe', 'inherit'] });
  let out = '';
  parent.stdout.on('data', (d) => (out += d));
  try {
    const zombie = Number(await until(() => /^(\d+)\n/.exec(out)?.[1], 'the parent printed its child'));
    await until(() => !isAlive(zombie), 'the child has exited');
    expect(isReaped(zombie)).toBe(false);
    parent.stdin.write('\n');
    await until(() => out.includes('reaped'), 'the parent reaped its child');
    expect(isReaped(zombie)).toBe(true);
  } finally {
    parent.kill('SIGKILL');
  }
});
