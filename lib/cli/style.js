// Colour only where it helps: a terminal, unless NO_COLOR; FORCE_COLOR forces it.
export function colorEnabled(stream = process.stdout, env = process.env) {
  if (env.NO_COLOR !== undefined && env.NO_COLOR !== '') return false;
  if (env.FORCE_COLOR !== undefined) return env.FORCE_COLOR !== '0' && env.FORCE_COLOR !== 'false';
  return Boolean(stream.isTTY);
}

const CODES = { red: [31, 39], green: [32, 39], yellow: [33, 39], cyan: [36, 39], dim: [2, 22], bold: [1, 22] };

export function makeStyle(enabled) {
  const style = {};
  for (const [name, [open, close]] of Object.entries(CODES)) {
    style[name] = enabled ? (s) => `\x1b[${open}m${s}\x1b[${close}m` : (s) => String(s);
  }
  return style;
}
