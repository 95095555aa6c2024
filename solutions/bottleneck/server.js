// The bottleneck lesson (bottleneck): one process, one thread. While /heavy burns the CPU,
// nothing else can be answered: that is the problem clustering solves.
import express from 'express';

const app = express();

app.get('/', (req, res) => {
  res.json({ pid: process.pid });
});

app.get('/heavy', (req, res) => {
  const ms = Math.min(Number(req.query.ms) || 100, 10_000);
  // A synchronous loop holds the event loop: no other request is even read
  // until it ends. (A setTimeout would wait without blocking anything.)
  const end = Date.now() + ms;
  while (Date.now() < end) {
    // burn
  }
  res.json({ pid: process.pid, ms });
});

const port = Number(process.env.PORT) || 3000;
// express 5 passes a failed listen (EADDRINUSE) to the callback: say so and stop.
app.listen(port, (err) => {
  if (err) throw err;
  console.log(`pid ${process.pid} listening on http://localhost:${port}`);
});
