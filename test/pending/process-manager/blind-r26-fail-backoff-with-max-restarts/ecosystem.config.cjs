module.exports = {
  apps: [
    {
      name: 'pm-backoff-giveup',
      script: 'server.js',
      exec_mode: 'cluster',
      instances: Number(process.env.WORKERS),
      wait_ready: true,
      listen_timeout: 10000,
      kill_timeout: 10000,
      max_memory_restart: '150M',
      exp_backoff_restart_delay: 100,
      // "and don't let a broken deploy loop forever: give up after 5 crashes in a minute"
      max_restarts: 5,
      min_uptime: 60000,
    },
  ],
};
