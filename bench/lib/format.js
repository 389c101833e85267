// Number formatting shared by progress lines and the report.

/** Microseconds with a unit that keeps 3 significant digits readable. */
export function formatUs(us) {
  if (us === undefined || us === null || Number.isNaN(us)) return "—";
  if (us >= 1e6) return `${(us / 1e6).toFixed(2)} s`;
  if (us >= 1e3) return `${(us / 1e3).toFixed(us >= 1e5 ? 0 : 2)} ms`;
  if (us >= 100) return `${us.toFixed(0)} µs`;
  if (us >= 10) return `${us.toFixed(1)} µs`;
  return `${us.toFixed(2)} µs`;
}

/** Operations per second, grouped. */
export function formatOps(ops) {
  if (!Number.isFinite(ops)) return "—";
  return ops >= 100 ? Math.round(ops).toLocaleString("en-US") : ops.toFixed(1);
}

/** A ratio like 1.23× (or — when either side is missing). */
export function formatRatio(r) {
  if (!Number.isFinite(r)) return "—";
  return r >= 100 ? `${Math.round(r)}×` : r >= 10 ? `${r.toFixed(1)}×` : `${r.toFixed(2)}×`;
}

/** One progress line for a result row. */
export function formatRow(row) {
  const label = row.case.padEnd(13);
  if (row.status !== "ok") return `${label} ${row.status}: ${row.reason}`;
  if (row.onceMs !== undefined) return `${label} ${row.onceMs.toFixed(1)} ms (once)`;
  if (row.perSessionKB !== undefined)
    return `${label} ${row.perSessionKB.toFixed(0)} KB/session over ${row.sessions} sessions`;
  if (row.p50Ms !== undefined)
    return `${label} p50 ${row.p50Ms.toFixed(2)} ms, p99 ${row.p99Ms.toFixed(1)} ms, max ${row.maxMs.toFixed(1)} ms (${row.samples} samples, wall ${row.wallMs.toFixed(0)} ms)`;
  if (row.p99Ms !== undefined)
    return `${label} p99 ${row.p99Ms.toFixed(1)} ms, max ${row.maxMs.toFixed(1)} ms, wall ${row.wallMs.toFixed(0)} ms`;
  return `${label} median ${formatUs(row.medianUs)}, p99 ${formatUs(row.p99Us)} (${row.samples} samples)`;
}
