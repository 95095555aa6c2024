// The classroom server's limits, in one place: they bound its memory and what
// one learner (or someone who only knows the join code) can make it do.
// README.md ("Running a classroom") documents them for instructors.

export const LIMITS = Object.freeze({
  // Learners one class accepts; joins beyond get 409 "the class is full".
  maxLearners: 500,
  // Attempts kept in the class history (export); the oldest go first. The
  // grid, stuck detection and failing steps use per-lesson totals, which
  // never drop anything.
  maxStoredAttempts: 10000,
  // Distinct failed steps counted per learner and lesson (a verifier has ~10).
  maxStepsPerLesson: 40,
  // Report ids remembered per learner, to ignore a report sent twice (a retry
  // after a timeout whose first try did arrive).
  maxRememberedReportIds: 64,
  // Reports in one request (a learner's queue sent after an outage).
  maxReportsPerRequest: 20,
  // Request bodies, in bytes.
  maxBodyBytes: 8 * 1024,
  // Per learner: a burst of 20 reports, then one every 2 s (a verify takes
  // several seconds, so a real learner never reaches it).
  reportBurst: 20,
  reportRefillMs: 2000,
  // Per client address: distinct wrong join codes (the same stale code sent
  // again counts once) before new joins from it get 429; wrong instructor
  // tokens are counted apart. Learners already in (their key) and the
  // instructor (the token) are never held back by others' guesses.
  authFailureBurst: 20,
  authFailureRefillMs: 3000,
  // Per client address: joins. A class behind one NAT joins within a minute
  // or two (a burst of 40), then one more every 10 s; a script that read the
  // projected code cannot fill the class.
  joinBurst: 40,
  joinRefillMs: 10000,
  // Live dashboards connected at once; one more evicts the one that reads
  // least (a stalled one), so the instructor's own reload always gets in.
  maxDashboards: 20,
  // Bytes a dashboard's stream may have waiting to be sent (a dashboard that
  // stopped reading), besides the snapshot it got on connecting; beyond, it
  // is dropped and the browser reconnects and gets a fresh snapshot.
  maxStreamBufferBytes: 1024 * 1024,
});

export const NAME_MAX = 40;
export const TITLE_MAX = 80;
