#!/usr/bin/env node
// The scheduler's latency cases in one short process, for before/after runs of two builds:
// `node bench/scheduler-probe.js [ROOT] [--case=spin8|past-cap|batch-spread]`, ROOT being a
// checkout built with `npm run build` (default: this one). Prints one JSON line.
//  - spin8: a trivial eval's latency (p50 / p99 / max, ms) while 8 sessions run
//    `while (true) {}` with 2 s budgets at the default executor cap, as case (k) of bench/run.js;
//  - spin8-one-turn: the same with QJSN_EXECUTOR_THREADS=1 and 300 ms budgets: one turn for 8
//    spinners, the state the LoopGuard puts a 2-core machine in (cores - 1 turns) when the event
//    loop waited for a core, which a loaded machine never shows (other processes fill the cores);
//  - past-cap: the same with QJSN_EXECUTOR_THREADS=4 and 6 spinners, as the scheduler case's row;
//  - batch-spread: medians (µs) of 10 consecutive batches of 200 `await eval("1+1")`, in a fresh
//    process, then again after eight sessions spun for 200 ms of CPU each (as the scheduler case).
// Run pairs in alternating order (ABAB) and compare medians: one process's figures move a lot on
// a shared machine.
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const root = resolve(args.find((a) => !a.startsWith("--")) ?? new URL("../", import.meta.url).pathname);
const which = args.find((a) => a.startsWith("--case="))?.slice("--case=".length) ?? "spin8";
if (which === "past-cap") process.env.QJSN_EXECUTOR_THREADS = "4";
if (which === "spin8-one-turn") process.env.QJSN_EXECUTOR_THREADS = "1";
const api = await import(pathToFileURL(`${root}/dist/index.js`).href);

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const sorted = (xs) => [...xs].sort((a, b) => a - b);
const at = (xs, p) => xs[Math.min(xs.length - 1, Math.floor(p * xs.length))];

/** Probe evals 1 ms apart while `spinners` sessions spin for `spinMs` of CPU each. */
async function probeWhileSpinning(spinners, spinMs) {
  const probe = new api.Sandbox();
  await probe.eval("1+1");
  const sbs = Array.from(
    { length: spinners },
    () => new api.Sandbox({ executionTimeoutMs: spinMs, wallTimeoutMs: 600_000 }),
  );
  let done = false;
  const spinning = Promise.all(sbs.map((s) => s.run("while (true) {}"))).then(() => (done = true));
  const waits = [];
  while (!done) {
    const started = performance.now();
    if ((await probe.eval("1+1")) !== 2) throw new Error("the probe eval did not return 2");
    waits.push(performance.now() - started);
    await sleep(1);
  }
  await spinning;
  for (const s of [...sbs, probe]) s.dispose();
  const w = sorted(waits);
  return { p50Ms: at(w, 0.5), p99Ms: at(w, 0.99), maxMs: w.at(-1), samples: w.length };
}

/**
 * Batch medians (µs) of `batches` batches of 200 `await sb.eval("1+1")`: min, median, max and all,
 * and the process's CPU time per eval (µs, every thread: spins included).
 */
async function batchMedians(sb, batches) {
  const medians = [];
  const cpu = process.cpuUsage();
  for (let b = 0; b < batches; b++) {
    const times = [];
    for (let i = 0; i < 200; i++) {
      const started = performance.now();
      await sb.eval("1+1");
      times.push((performance.now() - started) * 1000);
    }
    medians.push(at(sorted(times), 0.5));
  }
  const used = process.cpuUsage(cpu);
  const m = sorted(medians);
  return {
    minUs: m[0],
    medianUs: at(m, 0.5),
    maxUs: m.at(-1),
    cpuUsPerEval: (used.user + used.system) / (batches * 200),
    medians,
  };
}

async function batchSpread(batches) {
  const sb = new api.Sandbox();
  const fresh = await batchMedians(sb, batches);
  const spinners = Array.from({ length: 8 }, () => new api.Sandbox({ executionTimeoutMs: 200 }));
  await Promise.all(spinners.map((s) => s.run("while (true) {}")));
  for (const s of spinners) s.dispose();
  const afterSpinners = await batchMedians(sb, batches);
  sb.dispose();
  return { fresh, afterSpinners };
}

const runs = {
  spin8: () => probeWhileSpinning(8, 2000),
  "spin8-one-turn": () => probeWhileSpinning(8, 300),
  "past-cap": () => probeWhileSpinning(6, 2000),
  "batch-spread": () => batchSpread(10),
};
const result = await runs[which]();
process.stdout.write(`${JSON.stringify({ case: which, root, ...result })}\n`);
process.exit(0);
