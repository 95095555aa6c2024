// A rolling restart replaces workers one at a time: the next replacement is
// forked only once the one before it listens (N, N+1, N). Forking them all
// at once (Promise.all, forEach(async ...), a loop without its await) keeps
// capacity and fails no request, so no other check sees it; it starts 2N
// processes at once, the CPU and memory spike a rolling restart is there to
// avoid, and a bad deploy then fails on every replacement together.
//
// Certain, not a matter of timing: the verifier holds every new worker
// stopped for 1 s right after its 'online' (shared/throttle.js), so a
// replacement cannot listen before the end of its hold. A replacement first
// seen while another was still held was forked before that one could have
// listened. A replacement the watcher missed (seen too late to hold) proves
// nothing either way and is left out.

/**
 * @param {Map<number, { firstSeen?: number, heldAt?: number, releasedAt?: number }>} held what the watcher saw of each new worker (throttle.held)
 * @param {{ holdMs: number }} o
 * @returns {{ first: number, next: number, afterMs: number, stillHeldMs: number }[]} each replacement forked while an
 *   earlier one was still held: first (held), next (forked meanwhile), afterMs: next's fork after first's,
 *   stillHeldMs: how long first was still held then
 */
export function startedTogether(held, { holdMs }) {
  const seen = [...held].filter(([, h]) => h.firstSeen !== undefined).sort(([, a], [, b]) => a.firstSeen - b.firstSeen);
  const found = [];
  for (const [pid, h] of seen) {
    if (h.heldAt === undefined) continue;
    const release = h.releasedAt ?? h.heldAt + holdMs;
    for (const [other, o] of seen) {
      if (other === pid || o.firstSeen < h.firstSeen || o.firstSeen >= release) continue;
      found.push({ first: pid, next: other, afterMs: Math.round(o.firstSeen - h.firstSeen), stillHeldMs: Math.round(release - o.firstSeen) });
    }
  }
  return found;
}

/** The failure for startedTogether's findings: what was seen, and the causes that produce it. */
export function startedTogetherFailure(found, { what = 'the restart', holdMs }) {
  const [f] = found;
  const pairs = new Set(found.flatMap((x) => [x.first, x.next]));
  return {
    message: `During ${what}, ${pairs.size} replacements were starting at once: worker ${f.next} was forked ${f.afterMs} ms after worker ${f.first}, before ${f.first} could listen.`,
    expected: 'one replacement at a time: the next one is forked only after the one before it listens (capacity N, N+1, N)',
    actual: `${found.map((x) => `${x.next} forked while ${x.first} was still starting (${x.stillHeldMs} ms before it could listen)`).join('; ')}`,
    explanation:
      `The verifier pauses every new worker for ${holdMs / 1000} s right after its 'online', so a replacement cannot listen before that pause ends; these were forked during another's. ` +
      'Forking every replacement at once keeps capacity, but starts twice as many processes as WORKERS during each deploy (the CPU and memory spike a rolling restart avoids), and a bad deploy then fails on every replacement together. ' +
      "Possible causes: workers.forEach(async (w) => ...) (forEach does not wait for the callbacks), Promise.all over the workers, a loop whose await is missing, or forking the next replacement on 'online' instead of after 'listening'.",
    hint: "for (const old of workers) { const fresh = cluster.fork(); await once(fresh, 'listening'); old.disconnect(); }: a for...of loop with await, one replacement at a time.",
  };
}
