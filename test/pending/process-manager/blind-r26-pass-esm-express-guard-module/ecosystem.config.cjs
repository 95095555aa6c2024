module.exports = {
  apps: [{
    name: 'pm-express-esm',
    script: 'server.js',
    exec_mode: 'cluster',
    instances: Number(process.env.WORKERS) || 'max',
    wait_ready: true,
    listen_timeout: 10000,
    kill_timeout: 10000,
    max_memory_restart: '150M',
    exp_backoff_restart_delay: 120, // 120, 180, 270, 405, 607 ms ... capped by PM2 at 15 s
  }],
};
