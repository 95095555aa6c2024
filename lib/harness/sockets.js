// Which TCP ports a set of processes listens on, from /proc (Linux only), so
// that "nothing answered on PORT" can say where the program listens instead.
import { readFileSync, readdirSync, readlinkSync } from 'node:fs';

/** The rows of /proc/net/tcp{,6}: { hex, port, remoteHex, state, rxQueue, inode }. */
function tcpRows() {
  const rows = [];
  for (const table of ['/proc/net/tcp', '/proc/net/tcp6']) {
    let text;
    try {
      text = readFileSync(table, 'utf8');
    } catch {
      continue;
    }
    for (const row of text.split('\n').slice(1)) {
      const f = row.trim().split(/\s+/);
      if (f.length < 10) continue;
      const [hex, port] = f[1].split(':');
      rows.push({ hex, port: parseInt(port, 16), remoteHex: f[2].split(':')[0], state: f[3], rxQueue: parseInt(f[4].split(':')[1], 16), inode: f[9] });
    }
  }
  return rows;
}

function listeningInodes() {
  const byInode = new Map();
  for (const r of tcpRows()) {
    if (r.state === '0A') byInode.set(r.inode, { port: r.port, ...describeAddress(r.hex) }); // 0A = LISTEN
  }
  return byInode;
}

/** The socket inodes that the given pids hold open. */
function socketInodesOf(pids) {
  const inodes = [];
  for (const pid of pids) {
    let fds;
    try {
      fds = readdirSync(`/proc/${pid}/fd`);
    } catch {
      continue;
    }
    for (const fd of fds) {
      try {
        const m = /^socket:\[(\d+)\]$/.exec(readlinkSync(`/proc/${pid}/fd/${fd}`));
        if (m) inodes.push(m[1]);
      } catch {
        // the fd closed while we looked
      }
    }
  }
  return inodes;
}

/**
 * How many established connections to the local port the given pids hold:
 * with the workers' pids, how many of a burst's connections the primary has
 * handed to a worker so far. Linux only (elsewhere: 0).
 */
export function connectionsHeld(port, pids) {
  if (process.platform !== 'linux') return 0;
  const established = new Set(tcpRows().filter((r) => r.state === '01' && r.port === port).map((r) => r.inode));
  return socketInodesOf(pids).filter((inode) => established.has(inode)).length;
}

/**
 * How many established connections to the local port still have bytes the
 * server has not read (their receive queue): 0 once the program has read
 * every request sent to it. Linux only (elsewhere: 0).
 */
export function unreadConnections(port) {
  if (process.platform !== 'linux') return 0;
  return tcpRows().filter((r) => r.state === '01' && r.port === port && r.rxQueue > 0).length;
}

/**
 * How many established connections to the local port the given pids hold
 * whose other end is one of `remoteAddresses` (IPv4): with a worker's pids
 * and the addresses a verifier's clients connect from, whether a request of
 * theirs has reached a worker yet. Linux only (elsewhere: 0).
 */
export function connectionsHeldFrom(port, pids, remoteAddresses) {
  if (process.platform !== 'linux') return 0;
  const wanted = new Set(remoteAddresses.flatMap((a) => [a, `::ffff:${a}`]));
  const established = new Set(tcpRows().filter((r) => r.state === '01' && r.port === port && wanted.has(describeAddress(r.remoteHex).address)).map((r) => r.inode));
  return socketInodesOf(pids).filter((inode) => established.has(inode)).length;
}

/**
 * The listening sockets of the given pids: [{ port, address, reachable }],
 * where reachable says whether a client connecting to 127.0.0.1 gets there
 * (a program that listens on ::1 or on a LAN address only is not).
 */
export function listeningSockets(pids) {
  if (process.platform !== 'linux') return [];
  const inodes = listeningInodes();
  const found = new Map();
  for (const inode of socketInodesOf(pids)) if (inodes.has(inode)) found.set(inode, inodes.get(inode));
  return [...found.values()];
}

// /proc/net/tcp{,6} addresses are hex in host byte order, 32 bits at a time.
function describeAddress(hex) {
  const words = hex.match(/.{8}/g).map((w) => w.match(/../g).reverse().join(''));
  const v4 = (w) => w.match(/../g).map((b) => parseInt(b, 16)).join('.');
  if (words.length === 1) {
    const address = v4(words[0]);
    return { address, reachable: address === '0.0.0.0' || address.startsWith('127.') };
  }
  const all = words.join('').toLowerCase();
  if (/^0{32}$/.test(all)) return { address: '::', reachable: true };
  if (all === `${'0'.repeat(31)}1`) return { address: '::1', reachable: false };
  if (all.startsWith(`${'0'.repeat(20)}ffff`)) {
    const address = v4(words[3]);
    return { address: `::ffff:${address}`, reachable: address === '0.0.0.0' || address.startsWith('127.') };
  }
  return { address: words.join('').replace(/(.{4})(?!$)/g, '$1:'), reachable: false };
}

/**
 * Whether something other than the given pids listens on the port: another
 * program took it between the verifier choosing it and the learner's listen.
 */
export function takenByOthers(port, pids, { host } = {}) {
  if (process.platform !== 'linux') return false;
  // Given the address the program must listen on, a listener on another
  // single address (a second run of it, on another HOST) is in nobody's way.
  const inWay = (s) => !host || [host, `::ffff:${host}`, '0.0.0.0', '::'].includes(s.address);
  const onPort = [...listeningInodes()].filter(([, s]) => s.port === port && inWay(s)).map(([inode]) => inode);
  if (onPort.length === 0) return false;
  const ours = new Set(socketInodesOf(pids));
  return onPort.some((inode) => !ours.has(inode));
}
