// How the fork lesson's throughput compares with the learner's bottleneck
// figure. Both are measured on the same route, but at different moments and
// with different numbers of connections, so a ratio above what the cores
// allow says the two figures were not taken alike: the sentence says so
// rather than promise a speed-up no machine can give.

/** The sentence after "N requests/s with W workers". */
export function speedupSentence(rps, bottleneckRps, { workers, cores }) {
  const limit = Math.min(workers, cores);
  const ceiling = `at most about ${limit}x on ${cores} cores`;
  if (!bottleneckRps) return ` (verify the bottleneck lesson to compare); ${ceiling}`;
  const ratio = rps / bottleneckRps;
  const base = ` = ${ratio.toFixed(1)}x your figure from the bottleneck lesson (${bottleneckRps}/s); ${ceiling}`;
  // 15 %: two short measurements on a shared machine differ by that much anyway.
  if (ratio <= limit * 1.15) return base;
  return `${base}. More than ${limit}x means the two figures were not measured alike: the bottleneck figure was taken with fewer connections (4, against ${2 * workers} here) or while the machine was busier, so take the ratio as a rough guide`;
}
