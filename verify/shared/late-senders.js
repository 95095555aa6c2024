// Clients that open a connection and send their request a moment later (a
// client slow to send, a proxy that opens connections ahead of its
// requests). When a worker retires in that moment, it holds a connection
// whose request it has not read yet. Node's own server.close() (what
// worker.disconnect() calls) leaves such a connection open and answers it;
// drain libraries that end every socket with no request in progress
// (http-terminator's terminate(), stoppable's stop()) close it unanswered,
// and its client loses a request it had already sent. With fresh connections
// that send at once, that loss needs a connection to land in a window of a
// few milliseconds and shows one run in several; with enough connections
// always waiting, every retiring worker holds some, and it shows every time.
import { request } from '../../lib/harness/http.js';

// How long each connection waits before it sends its request.
export const SEND_AFTER_MS = 200;
// Connections waiting at any moment, unless a lesson asks for more: about 3
// per worker of 3. The loops start sendAfterMs / connections apart, so that
// connections open at an even pace: started together, they opened in bursts
// of 9 one cycle apart, and half of all 100 ms stretches saw no connection
// open, and a drain that ended unread connections 100 ms after its worker
// stopped listening found none on any of a restart's 3 retirees about one
// restart in eight (0.5^3).
export const CONNECTIONS = 9;

/**
 * Starts the late senders: `connections` loops (CONNECTIONS unless said), started evenly spread over
 * sendAfterMs, each opening a connection,
 * sending GET `path` sendAfterMs (default SEND_AFTER_MS) later, waiting for
 * the answer, again.
 * @returns {{ results: object[], stop({ abandon }?): Promise<object[]> }} results as startLoad's,
 *   each with sentAfterMs
 */
export function startLateSenders(ctx, { path = '/', timeoutMs = 4000, sendAfterMs = SEND_AFTER_MS, connections = CONNECTIONS } = {}) {
  const results = [];
  let running = true;
  const pending = new Set();
  ctx.signal.addEventListener(
    'abort',
    () => {
      running = false;
      for (const p of pending) p.controller.abort();
    },
    { once: true },
  );
  const loop = async (_, i) => {
    await new Promise((resolve) => setTimeout(resolve, (i * sendAfterMs) / connections));
    while (running && !ctx.signal.aborted) {
      const start = performance.now();
      const controller = new AbortController();
      const entry = { start, controller };
      pending.add(entry);
      const gate = new Promise((resolve) => setTimeout(resolve, sendAfterMs));
      const r = await request(ctx.port, path, { timeoutMs, host: ctx.program?.host ?? undefined, signal: controller.signal, gate });
      pending.delete(entry);
      results.push({ ...r, start, end: performance.now(), sentAfterMs: sendAfterMs, ...(controller.signal.aborted && { abandoned: true }) });
    }
  };
  const loops = Array.from({ length: connections }, loop);
  return {
    results,
    /** Stops sending; abandon({ start }) picks the requests not worth waiting for (as startLoad's stop). */
    async stop({ abandon } = {}) {
      running = false;
      if (abandon) for (const p of pending) if (abandon(p)) p.controller.abort();
      await Promise.all(loops);
      return results;
    },
  };
}
