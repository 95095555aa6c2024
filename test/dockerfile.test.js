// The containers lesson reads a Dockerfile as Docker does (verify/shared/dockerfile.js):
// continuation lines, comments, the final stage only, exec form vs shell form, both ENV forms.
import { parseDockerfile, execForm, lastOf, envOf } from '../verify/shared/dockerfile.js';

const text = `# syntax=docker/dockerfile:1
FROM node:22 AS build
USER root
CMD ["node", "build.js"]

FROM node:22-slim
ENV NODE_ENV=production \\
    # a comment inside a continuation is dropped
    PORT="3000" OTHER='a b'
ENV LEGACY some value
user node
CMD node \\
  server.js
`;

test('only the final stage counts; instructions are case-insensitive and continued lines join', () => {
  const d = parseDockerfile(text);
  expect(d.instructions.map((x) => x.name)).toEqual(['ENV', 'ENV', 'USER', 'CMD']);
  expect(lastOf(d, 'USER').args).toBe('node');
  expect(lastOf(d, 'CMD')).toEqual({ name: 'CMD', args: 'node server.js', line: 12 });
  expect(lastOf(d, 'ENTRYPOINT')).toBeUndefined();
});

test('ENV in both forms, quotes removed', () => {
  const vars = envOf(parseDockerfile(text));
  expect(vars.get('NODE_ENV')).toEqual({ value: 'production', line: 7 });
  expect(vars.get('PORT').value).toBe('3000');
  expect(vars.get('OTHER').value).toBe('a b');
  expect(vars.get('LEGACY').value).toBe('some value');
});

test('the exec form is a JSON array of strings; anything else is the shell form', () => {
  expect(execForm('["node", "server.js"]')).toEqual(['node', 'server.js']);
  expect(execForm('node server.js')).toBeNull();
  expect(execForm("['node', 'server.js']")).toBeNull(); // not JSON: Docker runs it through sh -c
  expect(execForm('[1, 2]')).toBeNull();
});
