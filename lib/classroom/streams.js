// The dashboards' live streams (server-sent events). A dashboard that stops
// reading (a laptop asleep, a tab frozen, someone holding connections open)
// would make every event pile up in the server's memory: each stream may
// have at most `maxBufferedBytes` waiting (besides the snapshot it started
// with, which a large class on a slow link takes a while to receive), beyond
// that it is dropped, and the browser's EventSource reconnects and starts
// again from a fresh snapshot.
// The slots are bounded too, but a new dashboard always gets one: it evicts
// the stream with the most waiting (the oldest when none is behind), so
// stalled streams can never lock the instructor out.
export class DashboardStreams {
  constructor({ max, maxBufferedBytes }) {
    this.max = max;
    this.maxBufferedBytes = maxBufferedBytes;
    this.streams = new Set();
    this.allowance = new WeakMap(); // stream -> bytes of its first snapshot
    this.dropped = 0; // streams dropped for reading too slowly
    this.evicted = 0; // streams that gave their slot to a newer one
  }

  get size() {
    return this.streams.size;
  }

  /** Bytes waiting in all streams. */
  get buffered() {
    let n = 0;
    for (const res of this.streams) n += res.writableLength;
    return n;
  }

  /** `snapshotBytes`: what was written to it on connecting, allowed on top of the bound. */
  add(res, snapshotBytes = 0) {
    while (this.streams.size >= this.max) {
      let victim = null;
      for (const s of this.streams) if (!victim || s.writableLength > victim.writableLength) victim = s;
      this.streams.delete(victim);
      this.evicted += 1;
      victim.destroy();
    }
    this.streams.add(res);
    this.allowance.set(res, snapshotBytes);
  }

  delete(res) {
    this.streams.delete(res);
  }

  /** Writes to every stream; one with too much waiting is dropped instead. */
  broadcast(text) {
    for (const res of this.streams) {
      if (res.writableLength > this.maxBufferedBytes + (this.allowance.get(res) ?? 0)) {
        this.streams.delete(res);
        this.dropped += 1;
        res.destroy();
        continue;
      }
      res.write(text);
    }
  }

  endAll() {
    for (const res of this.streams) res.end();
    this.streams.clear();
  }
}
