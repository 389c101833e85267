// Case (k): latency of a trivial eval in one session while other sessions keep the engine busy.
// Only engines that run guests off the Node main thread can answer at all while a guest spins
// (on the main thread the probe waits for every spinner), so the others report why they skip it.
import { guestSource } from "../workloads/sources.js";
import { hostAsync } from "../workloads/host-functions.js";

const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));

function percentile(sorted, p) {
  return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];
}

/** Times `probe.evalAsync("1+1")` (1 ms apart) until `busy` settles or `forMs` passes. */
async function probeLatency(probe, code, busy, forMs) {
  const latencies = [];
  let done = false;
  busy.then(
    () => (done = true),
    () => (done = true),
  );
  const until = performance.now() + forMs;
  while (!done && performance.now() < until) {
    const started = performance.now();
    const value = await probe.evalAsync(code);
    latencies.push(performance.now() - started);
    if (value !== 2) throw new Error(`the probe eval returned ${value}`);
    await sleep(1);
  }
  if (latencies.length === 0) throw new Error("no probe eval completed while the load ran");
  latencies.sort((a, b) => a - b);
  return {
    p50Ms: percentile(latencies, 0.5),
    p99Ms: percentile(latencies, 0.99),
    maxMs: latencies.at(-1),
    samples: latencies.length,
  };
}

/**
 * Rows `latency-spin` (8 sessions run `while (true) {}` with `spinMs` budgets, started together)
 * and `latency-host` (4 sessions loop over 10,000 awaited host calls for `hostMs`).
 */
export async function runLatencyCases(adapter, { spinMs, hostMs, onProgress }) {
  if (!adapter.offThread) {
    const reason = "the engine runs guests on the Node main thread: no other eval can run while one spins";
    return ["latency-spin", "latency-host"].map((id) => ({ case: id, status: "skipped", reason }));
  }
  const code = guestSource("one-plus-one.js");
  const rows = [];
  const probe = await adapter.createSession();
  await probe.evalAsync(code); // warm: threads started, code paths loaded

  const spinners = await Promise.all(Array.from({ length: 8 }, () => adapter.createSession()));
  let started = performance.now();
  const spinning = Promise.all(spinners.map((s) => s.spin(guestSource("spin.js"), spinMs)));
  const spin = await probeLatency(probe, code, spinning, Number.POSITIVE_INFINITY);
  await spinning;
  rows.push({ case: "latency-spin", status: "ok", ...spin, wallMs: performance.now() - started, spinMs, sessions: 8 });
  onProgress?.(rows.at(-1));
  for (const s of spinners) s.dispose();

  const hosts = await Promise.all(
    Array.from({ length: 4 }, () => adapter.createSession({ async: { host: hostAsync } })),
  );
  const loopCode = guestSource("async-host-calls.js");
  let stop = false;
  const looping = Promise.all(
    hosts.map(async (s) => {
      while (!stop) await s.evalAsync(loopCode, { awaitResult: true });
    }),
  );
  started = performance.now();
  const host = await probeLatency(probe, code, new Promise(() => {}), hostMs);
  stop = true;
  await looping;
  rows.push({ case: "latency-host", status: "ok", ...host, wallMs: performance.now() - started, sessions: 4 });
  onProgress?.(rows.at(-1));
  for (const s of hosts) s.dispose();
  probe.dispose();
  return rows;
}
