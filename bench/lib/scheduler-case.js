// Case "scheduler" (quickjs-native only, a process of its own with QJSN_EXECUTOR_THREADS=4, see
// child.js): what the executor's scheduling costs a session.
//  - batch-spread: `await eval("1+1")` in consecutive batches of 200 in a fresh process, then again
//    after eight spinning sessions ended; min / median / max of the batch medians (one median hides
//    batches that ran 10-40x slower). Target: every batch median ≤ 15 µs.
//  - past-cap: a trivial eval's wait while cap + 2 sessions spin (more spinners than executor
//    threads may run guest code). Target: no trivial eval waits over 50 ms.
//  - busy-host: an eval of ~0.5 s of CPU, wall time off-thread (`eval`) against the same eval on
//    the main thread (`evalSync`), while two ordinary-priority busy-loop processes compete for the
//    cores. Target: off-thread within 1.5x of the main thread.
import { spawn } from "node:child_process";
import { fileURLToPath, pathToFileURL } from "node:url";

const root = fileURLToPath(new URL("../../", import.meta.url));
const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const percentile = (sorted, p) => sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))];

/** Medians (µs) of `batches` consecutive batches of 200 `await sb.eval("1+1")`. */
async function batchMedians(sb, batches) {
  const medians = [];
  for (let b = 0; b < batches; b++) {
    const times = [];
    for (let i = 0; i < 200; i++) {
      const started = performance.now();
      await sb.eval("1+1");
      times.push((performance.now() - started) * 1000);
    }
    medians.push(median(times));
  }
  return medians;
}

const spread = (medians) => ({
  minUs: Math.min(...medians),
  medianUs: median(medians),
  maxUs: Math.max(...medians),
  batches: medians.length,
});

async function batchSpread(api, batches) {
  const sb = new api.Sandbox();
  const fresh = spread(await batchMedians(sb, batches));
  const spinners = Array.from({ length: 8 }, () => new api.Sandbox({ executionTimeoutMs: 200 }));
  await Promise.all(spinners.map((s) => s.run("while (true) {}")));
  for (const s of spinners) s.dispose();
  const after = spread(await batchMedians(sb, batches));
  sb.dispose();
  return {
    case: "batch-spread",
    status: "ok",
    fresh,
    afterSpinners: after,
    worstUs: Math.max(fresh.maxUs, after.maxUs),
  };
}

async function pastCap(api, forMs) {
  const cap = Number(process.env.QJSN_EXECUTOR_THREADS ?? 64);
  const probe = new api.Sandbox();
  await probe.eval("1+1"); // threads started
  const spinners = Array.from(
    { length: cap + 2 },
    () => new api.Sandbox({ executionTimeoutMs: 600_000, wallTimeoutMs: 600_000 }),
  );
  const spinning = spinners.map((s) => s.run("while (true) {}"));
  await sleep(50);
  const waits = [];
  const until = performance.now() + forMs;
  while (performance.now() < until) {
    const started = performance.now();
    if ((await probe.eval("1+1")) !== 2) throw new Error("the probe eval did not return 2");
    waits.push(performance.now() - started);
    await sleep(1);
  }
  for (const s of spinners) s.dispose();
  await Promise.all(spinning);
  probe.dispose();
  waits.sort((a, b) => a - b);
  return {
    case: "past-cap",
    status: "ok",
    cap,
    spinners: cap + 2,
    p50Ms: percentile(waits, 0.5),
    p99Ms: percentile(waits, 0.99),
    maxMs: waits.at(-1),
    samples: waits.length,
    wallMs: forMs,
  };
}

/** Two busy-loop processes of ordinary priority, each ending by itself after `ms`; kill() ends them sooner. */
function busyLoops(ms) {
  const children = [0, 1].map(() =>
    spawn(process.execPath, ["-e", `const end = Date.now() + ${ms}; while (Date.now() < end) {}`], { stdio: "ignore" }),
  );
  return {
    kill() {
      for (const c of children) c.kill("SIGKILL");
    },
  };
}

async function busyHost(api, rounds) {
  const code = "(() => { let s = 0; for (let i = 0; i < 1e7; i++) s = (s + i) % 1000003; return s; })()";
  const sb = new api.Sandbox({ executionTimeoutMs: 60_000 });
  const timeSync = () => {
    const started = performance.now();
    sb.evalSync(code, { timeoutMs: 60_000 });
    return performance.now() - started;
  };
  const timeAsync = async () => {
    const started = performance.now();
    await sb.eval(code);
    return performance.now() - started;
  };
  const quietSync = timeSync();
  const quietAsync = await timeAsync();
  const loops = busyLoops(60_000);
  const sync = [];
  const offThread = [];
  try {
    await sleep(100);
    for (let r = 0; r < rounds; r++) {
      // Alternating order, so neither side always runs first after a change in the load.
      if (r % 2 === 0) {
        sync.push(timeSync());
        offThread.push(await timeAsync());
      } else {
        offThread.push(await timeAsync());
        sync.push(timeSync());
      }
    }
  } finally {
    loops.kill();
    sb.dispose();
  }
  const syncMs = median(sync);
  const offThreadMs = median(offThread);
  return {
    case: "busy-host",
    status: "ok",
    quietSyncMs: quietSync,
    quietOffThreadMs: quietAsync,
    syncMs,
    offThreadMs,
    ratio: offThreadMs / syncMs,
    rounds,
  };
}

/** The three rows; `quick` runs fewer batches and rounds. */
export async function runSchedulerCase({ quick = false, onProgress = () => {} } = {}) {
  const api = await import(pathToFileURL(`${root}dist/index.js`).href);
  const rows = [];
  for (const run of [
    () => batchSpread(api, quick ? 5 : 20),
    () => pastCap(api, quick ? 500 : 2000),
    () => busyHost(api, quick ? 2 : 5),
  ]) {
    const row = await run();
    rows.push(row);
    onProgress(row);
  }
  return rows;
}

/** One progress line for a row of this case. */
export function formatSchedulerRow(row) {
  if (row.case === "batch-spread") {
    const s = (x) => `${x.minUs.toFixed(1)} / ${x.medianUs.toFixed(1)} / ${x.maxUs.toFixed(1)} µs`;
    return `batch-spread  medians of ${row.fresh.batches} batches of 200 (min / median / max): fresh ${s(row.fresh)}, after 8 spinners ${s(row.afterSpinners)}`;
  }
  if (row.case === "past-cap")
    return `past-cap      ${row.spinners} spinners, cap ${row.cap}: wait p50 ${row.p50Ms.toFixed(2)} ms, p99 ${row.p99Ms.toFixed(1)} ms, max ${row.maxMs.toFixed(1)} ms (${row.samples} samples)`;
  return `busy-host     2 busy loops: off-thread ${row.offThreadMs.toFixed(0)} ms, main thread ${row.syncMs.toFixed(0)} ms (${row.ratio.toFixed(2)}x); quiet ${row.quietOffThreadMs.toFixed(0)} / ${row.quietSyncMs.toFixed(0)} ms`;
}
