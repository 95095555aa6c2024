// PM2's settings for the process-manager lesson. CommonJS (.cjs): PM2 loads it
// with require(), and the workshop's folder is "type": "module". It runs in
// the process that starts PM2, so process.env is that command's environment.
module.exports = {
  apps: [
    {
      name: 'cluster-workshop',
      script: 'server.js',
      // PM2 as the cluster primary: it calls cluster.fork() for each instance,
      // and the instances share one port (fork mode could not).
      exec_mode: 'cluster',
      // The deployment decides the count, as in the fork lesson; one per CPU
      // when it does not say.
      instances: Number(process.env.WORKERS) || 'max',
      // A reload stops an old instance when its replacement says ready
      // (process.send('ready') after its start-up work), not on its first
      // listen; and waits at most listen_timeout ms for it, well above the
      // start-up (STARTUP_MS) on a busy machine.
      wait_ready: true,
      listen_timeout: 10000,
      // PM2 sends SIGINT, then SIGKILL after kill_timeout ms: longer than the
      // longest request plus the drain of keep-alive clients.
      kill_timeout: 10000,
      // The health-check lesson's memory limit: PM2 reloads (gracefully) an
      // instance whose RSS is over it.
      max_memory_restart: '150M',
      // The capstone's crash loop: wait 100 ms before restarting an instance
      // that died, 1.5 times longer each time it dies again (up to 15 s),
      // instead of restarting it as fast as it dies and giving up after 16.
      exp_backoff_restart_delay: 100,
    },
  ],
};
