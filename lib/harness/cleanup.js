// Programs that are running right now, so that whatever ends the verifier
// (a signal, an uncaught error, process.exit) kills them first.
const live = new Set();
let installed = false;

export function track(program) {
  live.add(program);
  if (!installed) {
    installed = true;
    process.on('exit', killAllNow);
  }
}

export function untrack(program) {
  live.delete(program);
}

export function liveCount() {
  return live.size;
}

export function killAllNow() {
  for (const program of live) program.killNow();
}

/** Stops every live program and waits until their processes are gone. */
export async function stopAll() {
  await Promise.all([...live].map((p) => p.stop({ graceMs: 500 })));
}
