// Local addresses a verifier plays clients or machines from (127.0.0.2 and
// up): Linux routes all of 127.0.0.0/8 to the loopback interface, macOS and
// some containers have only 127.0.0.1 until aliases are added.
import net from 'node:net';

/**
 * n client addresses, each in a /24 of its own: 127.0.1.10, 127.0.2.10, ...
 * Real clients come from many networks; nginx's ip_hash keys an IPv4 client
 * on the first three octets of its address, so clients that all share
 * 127.0.0.x would all be one client to it (all sent to one machine).
 */
export function clientsInOwnNetworks(n) {
  return Array.from({ length: n }, (_, i) => `127.0.${i + 1}.10`);
}

/** The macOS command that adds the addresses (Linux routes all of 127.0.0.0/8 to lo). */
export function macAliasCommand(addresses) {
  return `for a in ${addresses.join(' ')}; do sudo ifconfig lo0 alias $a up; done`;
}

/**
 * Connects once from each address to a throwaway local server; resolves the
 * first failure ({ address, code, message }) or null when all work.
 */
export async function tryAddresses(addresses) {
  const server = net.createServer((socket) => socket.destroy());
  await new Promise((resolve, reject) => server.once('error', reject).listen(0, '127.0.0.1', resolve));
  const { port } = server.address();
  try {
    const outcomes = await Promise.all(
      addresses.map(
        (address) =>
          new Promise((resolve) => {
            const socket = net.connect({ port, host: '127.0.0.1', localAddress: address });
            const timer = setTimeout(() => done({ address, code: 'TIMEOUT', message: 'no connection within 2 s' }), 2000);
            const done = (result) => {
              clearTimeout(timer);
              socket.destroy();
              resolve(result);
            };
            socket.once('connect', () => done(null));
            socket.once('error', (err) => done({ address, code: err.code ?? 'ERROR', message: err.message }));
          }),
      ),
    );
    return outcomes.find(Boolean) ?? null;
  } finally {
    server.close();
  }
}

/** Whether a server can listen on each address (port 0); resolves the first failure or null. */
export async function tryListening(addresses) {
  for (const address of addresses) {
    const failure = await new Promise((resolve) => {
      const server = net.createServer();
      server.once('error', (err) => resolve({ address, code: err.code ?? 'ERROR', message: err.message }));
      server.listen(0, address, () => server.close(() => resolve(null)));
    });
    if (failure) return failure;
  }
  return null;
}
