// PM2 ecosystem file for the process-manager lesson (CommonJS server in server.js,
// made CommonJS by the package.json beside it).
module.exports = {
  apps: [
    {
      name: 'pm-http-class',
      script: 'server.js',
      exec_mode: 'cluster',
      instances: Number(process.env.WORKERS),
      wait_ready: true,
      listen_timeout: 8000,
      kill_timeout: 12000,
      max_memory_restart: '180M',
      exp_backoff_restart_delay: 200,
    },
  ],
};
