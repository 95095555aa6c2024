// PM2's settings for the process-manager lesson (CommonJS: PM2 require()s it).
// The lesson's Contract lists every setting the verifier expects.
module.exports = {
  apps: [
    {
      name: 'cluster-workshop',
      script: 'server.js',
      // TODO: cluster mode, with as many instances as WORKERS says.
      exec_mode: 'fork',
      instances: 1,
      // TODO: wait for process.send('ready') (wait_ready), and for how long (listen_timeout).
      // TODO: kill_timeout: how long PM2 waits after SIGINT before SIGKILL.
      // TODO: max_memory_restart.
      // TODO: exp_backoff_restart_delay.
    },
  ],
};
