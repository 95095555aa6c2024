// The routes a lesson's contract names ("GET /heavy?ms=N"), read from the
// lesson text so that a new lesson needs no change here, turned into curl
// lines a learner can paste.
import { existsSync, readFileSync } from 'node:fs';
import { loadLessons } from '../../manifest.js';

const ROUTE = /\b(GET|POST|PUT|PATCH|DELETE) (\/[^\s`"'),;]*)/g;

function contractOf(lesson) {
  if (!existsSync(lesson.paths.text)) return '';
  const text = readFileSync(lesson.paths.text, 'utf8');
  const m = /^## Contract\s*$([\s\S]*?)(?=^## )/m.exec(text);
  return m ? m[1] : '';
}

/** Routes of the lesson's contract, then of the lessons before it (later contracts say "the lesson-1 routes"). */
export function routesOf(lesson, { max = 5 } = {}) {
  const lessons = loadLessons().slice(0, lesson.number).reverse();
  const seen = new Map();
  for (const l of lessons) {
    for (const [, method, path] of contractOf(l).matchAll(ROUTE)) {
      const clean = path.replace(/[.:]+$/, '');
      const key = `${method} ${clean.split('?')[0]}`;
      if (!seen.has(key)) seen.set(key, { method, path: sampleValues(clean) });
    }
  }
  const routes = [...seen.values()];
  if (!routes.some((r) => r.method === 'GET' && r.path === '/')) routes.unshift({ method: 'GET', path: '/' });
  return routes.slice(0, max);
}

// "ms=N" becomes a value worth trying by hand: long enough to see the block.
function sampleValues(path) {
  return path.replace(/\bms=[A-Z]\b/, 'ms=2000').replace(/=[A-Z]\b/g, '=1');
}

export function curlLine(port, { method, path }) {
  const url = `http://127.0.0.1:${port}${path}`;
  const quoted = /[?&]/.test(url) ? `'${url}'` : url;
  if (method === 'GET') return `curl -s ${quoted}`;
  return `curl -s -X ${method} -H 'content-type: application/json' -d '{}' ${quoted}`;
}
