// Blind-authored (written from the lesson text alone), author's note:
// CommonJS with require('node:http'), no express. The primary reads WORKERS
// (falls back to os.availableParallelism()), forks, and re-forks a worker that
// crashes; workers listen on { port: PORT, host: '127.0.0.1' } and answer JSON.
// expect: pass
'use strict';
const cluster = require('node:cluster');
const http = require('node:http');
const os = require('node:os');

const PORT = Number(process.env.PORT);

function workerCount() {
  const n = parseInt(process.env.WORKERS, 10);
  return Number.isInteger(n) && n > 0 ? n : os.availableParallelism();
}

if (cluster.isPrimary) {
  let stopping = false;
  process.on('SIGTERM', () => { stopping = true; process.exit(0); });
  process.on('SIGINT', () => { stopping = true; process.exit(0); });

  for (let i = 0; i < workerCount(); i++) cluster.fork();

  cluster.on('exit', (worker, code, signal) => {
    if (stopping || signal === 'SIGTERM' || signal === 'SIGINT') return;
    if (code !== 0) {
      console.error(`worker ${worker.process.pid} crashed (${code}), replacing it`);
      cluster.fork();
    }
  });
} else {
  function burn(ms) {
    const until = process.hrtime.bigint() + BigInt(Math.round(ms * 1e6));
    let x = 0;
    while (process.hrtime.bigint() < until) x += Math.sqrt(x + 1);
    return x;
  }

  const server = http.createServer(function (req, res) {
    const { pathname, searchParams } = new URL(req.url, `http://${req.headers.host || 'localhost'}`);
    let status = 200;
    let body;
    if (pathname === '/') {
      body = { pid: process.pid };
    } else if (pathname === '/heavy') {
      const ms = Number(searchParams.get('ms') || 0);
      burn(ms);
      body = { pid: process.pid, ms };
    } else {
      status = 404;
      body = { pid: process.pid, error: 'no such route' };
    }
    const json = JSON.stringify(body);
    res.writeHead(status, { 'Content-Type': 'application/json', 'Content-Length': Buffer.byteLength(json) });
    res.end(json);
  });

  server.listen({ port: PORT, host: '127.0.0.1' }, function () {
    console.log('worker %d up on 127.0.0.1:%d', process.pid, server.address().port);
  });
}
