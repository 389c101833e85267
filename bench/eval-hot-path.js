#!/usr/bin/env node
// The hot paths of a trivial eval alone, for before/after comparisons of a change to the engine's
// per-eval bookkeeping (its clock, its host-call table, the main thread's waits) or to the request
// that crosses the boundary: `node bench/eval-hot-path.js [CHECKOUT] [--rounds=N] [--batch=N]`
// loads CHECKOUT's build (dist/ and build/Release; default this checkout, or the addon named by
// QUICKJS_NATIVE_BINARY, which src/native.ts honours) and prints the median time per call of
// `evalSync("1+1")`, `evalSync("1+1", { displayChars })`, `await eval("1+1")` (the "eval-sync" and
// "eval-async" workloads of the full bench) and `new Sandbox()` + `dispose()`, each over `rounds`
// batches of `batch` calls, as wall time and as the process's CPU time (user + system, all
// threads: on a loaded machine the wall time also counts the waits for a core). Run it for two
// builds in alternating order (A B A B) and compare the medians: one process's median moves by
// several percent from one process to the next on a shared machine.
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { guestSource } from "./workloads/sources.js";

const args = process.argv.slice(2);
const root = resolve(args.find((a) => !a.startsWith("--")) ?? new URL("..", import.meta.url).pathname);
const option = (name, fallback) =>
  Number(args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback);
const rounds = option("rounds", 200);
const batch = option("batch", 200);

const { Sandbox } = await import(pathToFileURL(`${root}/dist/index.js`).href);

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

/** Median µs per call of `op` over `rounds` batches after a warm-up, as [wall, CPU]; a sync op runs without awaits. */
async function time(op, sync) {
  const run = sync
    ? () => {
        for (let i = 0; i < batch; i++) op();
      }
    : async () => {
        for (let i = 0; i < batch; i++) await op();
      };
  for (let i = 0; i < Math.max(5, rounds / 10); i++) await run();
  const wall = [];
  const cpu = [];
  for (let r = 0; r < rounds; r++) {
    const cpuStart = process.cpuUsage();
    const started = performance.now();
    await run();
    wall.push(performance.now() - started);
    const used = process.cpuUsage(cpuStart);
    cpu.push((used.user + used.system) / 1000);
  }
  return [wall, cpu].map((ms) => Number(((median(ms) * 1000) / batch).toFixed(3)));
}

const code = guestSource("one-plus-one.js");
const sandbox = new Sandbox();
const check = (value) => {
  if (value !== 2) throw new Error(`1+1 gave ${value}`);
};
check(sandbox.evalSync(code));
check(await sandbox.eval(code));
const display = { displayChars: 2000 };
const [evalSyncUs, evalSyncCpuUs] = await time(() => sandbox.evalSync(code), true);
const [displayEvalSyncUs, displayEvalSyncCpuUs] = await time(() => sandbox.evalSync(code, display), true);
const [awaitEvalUs, awaitEvalCpuUs] = await time(() => sandbox.eval(code), false);
const [createDisposeUs, createDisposeCpuUs] = await time(() => new Sandbox().dispose(), true);
const binary = process.env.QUICKJS_NATIVE_BINARY ?? null;
const figures = { evalSyncUs, evalSyncCpuUs, displayEvalSyncUs, displayEvalSyncCpuUs, awaitEvalUs, awaitEvalCpuUs };
console.log(JSON.stringify({ checkout: root, binary, rounds, batch, ...figures, createDisposeUs, createDisposeCpuUs }));
sandbox.dispose();
