module.exports = {
  apps: [
    {
      name: 'pm-throw',
      script: 'server.js',
      exec_mode: 'cluster',
      instances: Number(process.env.WORKERS),
      wait_ready: true,
      listen_timeout: 10000,
      kill_timeout: 10000,
      max_memory_restart: '150M',
      exp_backoff_restart_delay: 100,
    },
  ],
};
