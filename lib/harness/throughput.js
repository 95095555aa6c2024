// Throughput with autocannon, loaded only when a step measures it. The run
// is stopped after durationS (autocannon's own duration has a 1 s floor).
export async function measureThroughput(port, path, { durationS = 1, connections = 4, signal } = {}) {
  const { default: autocannon } = await import('autocannon');
  const result = await new Promise((resolve, reject) => {
    const instance = autocannon(
      { url: `http://127.0.0.1:${port}${path}`, connections, duration: durationS + 10, timeout: 5, sampleInt: 100 },
      (err, res) => (err ? reject(err) : resolve(res)),
    );
    const timer = setTimeout(() => instance.stop(), durationS * 1000);
    // A cancelled step (watch mode, Ctrl-C) stops the load at once.
    signal?.addEventListener(
      'abort',
      () => {
        clearTimeout(timer);
        instance.stop();
      },
      { once: true },
    );
  });
  const seconds = result.duration || durationS;
  return {
    rps: Math.round(result.requests.total / seconds),
    requests: result.requests.total,
    errors: result.errors + result.timeouts,
    non2xx: result.non2xx,
    p50: result.latency.p50,
    p99: result.latency.p99,
  };
}
