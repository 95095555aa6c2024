// The bottleneck lesson (bottleneck): one process, one thread.
// Run it:    PORT=3000 node server.js
// Check it:  {{cli}} verify bottleneck server.js
import express from 'express';

const app = express();

app.get('/', (req, res) => {
  res.json({ pid: process.pid });
});

app.get('/heavy', (req, res) => {
  const ms = Math.min(Number(req.query.ms) || 100, 10_000);
  // TODO: keep the CPU busy for `ms` milliseconds before answering, with a
  // synchronous loop (not a timer), so that this process can do nothing else.
  res.json({ pid: process.pid, ms });
});

const port = Number(process.env.PORT) || 3000;
app.listen(port, (err) => {
  if (err) throw err;
  console.log(`pid ${process.pid} listening on http://localhost:${port}`);
});
