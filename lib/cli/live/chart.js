// A terminal chart of requests per second over a run: one sparkline row per
// series on one shared scale, so two programs can be compared by eye. Plain
// characters, no dependency.
const BLOCKS = ['▁', '▂', '▃', '▄', '▅', '▆', '▇', '█'];

/**
 * @param {{ label: string, values: number[] }[]} series values per bucket (req/s)
 * @param {{ width?: number, ascii?: boolean }} [o] ascii: digits 0-9 instead of blocks
 * @returns {string[]} lines
 */
export function sparkChart(series, { width = 50, ascii = false } = {}) {
  const max = Math.max(1, ...series.flatMap((s) => s.values));
  const labelWidth = Math.max(...series.map((s) => s.label.length));
  const glyphs = ascii ? ['0', '1', '2', '3', '4', '5', '6', '7', '8', '9'] : BLOCKS;
  return series.map(({ label, values }) => {
    const cols = resample(values, width);
    const row = cols.map((v) => (v <= 0 ? ' ' : glyphs[Math.min(glyphs.length - 1, Math.floor((v / max) * glyphs.length))])).join('');
    const peak = Math.round(Math.max(0, ...values));
    return `${label.padEnd(labelWidth)} │${row}│ peak ${peak}/s`;
  });
}

// Averages neighbouring buckets when there are more than columns.
function resample(values, width) {
  if (values.length <= width) return values;
  const out = [];
  for (let i = 0; i < width; i++) {
    const from = Math.floor((i * values.length) / width);
    const to = Math.max(from + 1, Math.floor(((i + 1) * values.length) / width));
    const part = values.slice(from, to);
    out.push(part.reduce((a, b) => a + b, 0) / part.length);
  }
  return out;
}
