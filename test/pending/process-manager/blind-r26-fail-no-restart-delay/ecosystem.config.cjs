module.exports = {
  apps: [
    {
      name: 'pm-no-delay',
      script: 'server.js',
      exec_mode: 'cluster',
      instances: Number(process.env.WORKERS),
      wait_ready: true,
      listen_timeout: 10000,
      kill_timeout: 10000,
      max_memory_restart: '150M',
      // autorestart is on by default: PM2 brings crashed instances back by itself
    },
  ],
};
