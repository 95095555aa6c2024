module.exports = {
  apps: [
    {
      name: 'pm-fixed-delay',
      script: 'server.js',
      exec_mode: 'cluster',
      instances: Number(process.env.WORKERS),
      wait_ready: true,
      listen_timeout: 10000,
      kill_timeout: 10000,
      max_memory_restart: '150M',
      // "wait 100 ms before restarting a crashed instance"
      restart_delay: 100,
    },
  ],
};
