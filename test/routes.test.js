// The curl lines `run` prints come from each lesson's manifest entry
// ("routes"), and every one of them is a route the lesson's contract names,
// so a learner never gets a curl line for a route their starter lacks.
import { readFileSync } from 'node:fs';
import { loadLessons } from '../lib/manifest.js';
import { curlLine, routesOf } from '../lib/cli/live/routes.js';

test.each(loadLessons().map((l) => [l.id, l]))('%s: its routes are the ones its contract names, GET / first', (id, lesson) => {
  expect(lesson.routes?.length).toBeGreaterThan(0);
  const contract = /^## Contract\s*$([\s\S]*?)(?=^## )/m.exec(readFileSync(lesson.paths.text, 'utf8'))[1];
  const routes = routesOf(lesson);
  expect(routes[0]).toEqual({ method: 'GET', path: '/' });
  for (const { method, path } of routes.slice(1)) {
    expect({ route: `${method} ${path}`, named: contract.includes(`${method} ${path.split('?')[0]}`) }).toEqual({ route: `${method} ${path}`, named: true });
  }
});

test('curl lines quote the URL and send a JSON body where the route has one', () => {
  expect(curlLine(3000, { method: 'GET', path: '/slow?ms=5000' })).toBe("curl -s 'http://127.0.0.1:3000/slow?ms=5000'");
  expect(curlLine(3000, { method: 'POST', path: '/config', body: '{"greeting":"hello"}' })).toBe(
    `curl -s -X POST -H 'content-type: application/json' -d '{"greeting":"hello"}' 'http://127.0.0.1:3000/config'`,
  );
  expect(curlLine(3000, { method: 'POST', path: '/count' })).toBe("curl -s -X POST 'http://127.0.0.1:3000/count'");
});
