// The routes a lesson's contract names, from its manifest entry ("routes":
// ["GET /", "GET /slow?ms=5000", "POST /config {\"greeting\":\"hello\"}"]),
// turned into curl lines a learner can paste (URLs quoted: zsh stops at an
// unquoted ?). Only this lesson's routes: a later lesson's starter does not
// keep an earlier lesson's /config or /heavy.

/** [{ method, path, body? }] of the lesson, GET / first; GET / alone when the entry has none. */
export function routesOf(lesson, { max = Infinity } = {}) {
  const routes = (lesson.routes ?? []).map(parseRoute);
  if (!routes.some((r) => r.method === 'GET' && r.path === '/')) routes.unshift({ method: 'GET', path: '/' });
  return routes.slice(0, max);
}

/** "POST /config {...}" -> { method: 'POST', path: '/config', body: '{...}' } */
export function parseRoute(text) {
  const m = /^(GET|POST|PUT|PATCH|DELETE) (\/\S*)(?: (.+))?$/.exec(text.trim());
  if (!m) throw new Error(`Not a route: "${text}" (expected "METHOD /path [json body]")`);
  return m[3] === undefined ? { method: m[1], path: m[2] } : { method: m[1], path: m[2], body: m[3] };
}

/** host: where the program listens when its lesson gives it a HOST (127.0.0.1 otherwise). */
export function curlLine(port, { method, path, body }, host = '127.0.0.1') {
  const url = `'http://${host}:${port}${path}'`;
  if (method === 'GET') return `curl -s ${url}`;
  const data = body === undefined ? '' : ` -H 'content-type: application/json' -d '${body.replace(/'/g, "'\\''")}'`;
  return `curl -s -X ${method}${data} ${url}`;
}
