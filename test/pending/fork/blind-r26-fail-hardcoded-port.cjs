// Blind-authored (written from the lesson text alone), author's note:
// CommonJS + node:http. Forks WORKERS workers properly, but the workers keep
// the port from the lesson's curl example: server.listen(3000). All workers
// share port 3000, so nothing ever answers on the PORT the verifier chose.
// expect: fail at starts
// expect-text: listens on port 3000
// ready-timeout: 4000
const cluster = require('node:cluster');
const http = require('node:http');
const os = require('node:os');

if (cluster.isPrimary) {
  const count = parseInt(process.env.WORKERS || os.availableParallelism(), 10);
  for (let i = 0; i < count; i++) cluster.fork();
} else {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, 'http://127.0.0.1');
    res.setHeader('Content-Type', 'application/json');
    if (url.pathname === '/heavy') {
      const ms = Number(url.searchParams.get('ms')) || 0;
      const start = Date.now();
      while (Date.now() - start < ms) {}
      res.end(JSON.stringify({ pid: process.pid, ms }));
    } else {
      res.end(JSON.stringify({ pid: process.pid }));
    }
  });
  server.listen(3000, () => console.log(`worker ${process.pid} on http://localhost:3000`));
}
