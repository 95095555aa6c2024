// The beyond-one-machine verifier waits fail_timeout after a machine is back
// before it disturbs the next one (each nginx worker keeps its own failure
// counts): it reads max_fails and fail_timeout from the learner's upstream
// as nginx does (verify/shared/nginx.js), nginx's defaults where unwritten.
import { passiveHealth, nginxTimeMs } from '../verify/shared/nginx.js';

const conf = `
worker_processes auto;
http {
  upstream app {
    least_conn;
    server 127.0.0.2:3000 max_fails=3 fail_timeout=4s weight=2;
    # server 127.0.0.3:3000 fail_timeout=60s;   a comment is not a server
    server 127.0.0.3:3000
        fail_timeout=1m30s;
    server 127.0.0.4:3000 max_fails=0;
    keepalive 16;
  }
  server {
    listen 127.0.0.1:8080;
    location / { proxy_pass http://app; }
  }
}
`;

test('a server line gives its own max_fails and fail_timeout, across line breaks, comments ignored', () => {
  expect(passiveHealth(conf, '127.0.0.2:3000')).toEqual({ maxFails: 3, failTimeoutMs: 4000 });
  expect(passiveHealth(conf, '127.0.0.3:3000')).toEqual({ maxFails: 1, failTimeoutMs: 90000 });
  expect(passiveHealth(conf, '127.0.0.4:3000')).toEqual({ maxFails: 0, failTimeoutMs: 10000 });
});

test('a machine no server line names gets nginx defaults (max_fails=1, fail_timeout=10s)', () => {
  expect(passiveHealth(conf, '127.0.0.9:3000')).toEqual({ maxFails: 1, failTimeoutMs: 10000 });
  expect(passiveHealth(conf, '127.0.0.2:3001')).toEqual({ maxFails: 1, failTimeoutMs: 10000 });
});

test('nginx times: a bare number is seconds; units add up; anything else is not a time', () => {
  expect(nginxTimeMs('2')).toBe(2000);
  expect(nginxTimeMs('500ms')).toBe(500);
  expect(nginxTimeMs('1m30s')).toBe(90000);
  expect(nginxTimeMs('2x')).toBeNull();
  expect(nginxTimeMs('')).toBeNull();
});
