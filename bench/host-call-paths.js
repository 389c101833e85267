#!/usr/bin/env node
// The two hot host-call paths alone, for before/after comparisons of a change to the boundary:
// `node bench/host-call-paths.js [CHECKOUT] [--rounds=N]` loads CHECKOUT's build (dist/ and
// build/Release; default this checkout) and prints the median time per call of the "sync-host"
// and "async-host" workloads of the full bench (10,000 calls of `host(i)` in one eval, sync and
// awaited). Run it for two checkouts in alternating order (A B A B) and compare the medians: one
// process's median moves by several percent from one process to the next on a shared machine.
// `--result=object` has both host functions answer `{ n: i + 1 }` instead of the number (the
// guest sums `.n`): the path of a result encoded through the codec rather than as a number.
// It also times "inlineAwaitedHost", the awaited calls in an inline eval (no thread hand-over: the
// cost of settling a call shows), and "parkedSyncHost": a sync host call of an off-thread eval
// whose argument (an array of 4,096 numbers) is decoded in slices, so its answer comes later
// through `answerSync` (per call of 100 in one eval; the slices and their event-loop turns
// dominate it). Each case prints wall µs per call and the process's CPU µs per call (all threads,
// spin-waits included); `--cases=syncHost,awaitedHost,inlineAwaitedHost,parkedSyncHost` picks some.
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";
import { guestSource } from "./workloads/sources.js";
import { HOST_CALL_SUM, hostAsync, hostSync } from "./workloads/host-functions.js";

const args = process.argv.slice(2);
const root = resolve(args.find((a) => !a.startsWith("--")) ?? new URL("..", import.meta.url).pathname);
const rounds = Number(args.find((a) => a.startsWith("--rounds="))?.slice("--rounds=".length) ?? 200);
const objectResult = args.includes("--result=object");
const CALLS = 10_000;

const { Sandbox } = await import(pathToFileURL(`${root}/dist/index.js`).href);

function median(values) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor(sorted.length / 2)];
}

// The process's CPU time (user + system, all threads) per call of each case, beside its wall time:
// on a loaded machine the wall time also counts the waits for a core.
const cpuUs = {};

/** Median wall µs per call of `op` (`calls` host calls answering `sum`); its CPU µs go to `cpuUs[name]`. */
async function time(name, op, calls = CALLS, sum = HOST_CALL_SUM) {
  for (let i = 0; i < Math.max(5, rounds / 10); i++) await op(); // warm-up
  const samples = [];
  const cpuSamples = [];
  for (let i = 0; i < rounds; i++) {
    const cpuBefore = process.cpuUsage();
    const started = performance.now();
    const got = await op();
    samples.push(performance.now() - started);
    const cpu = process.cpuUsage(cpuBefore);
    cpuSamples.push(cpu.user + cpu.system);
    if (got !== sum) throw new Error(`wrong sum ${got}`);
  }
  cpuUs[name] = Number((median(cpuSamples) / calls).toFixed(4));
  return (median(samples) * 1000) / calls;
}

const asObjects = (code) =>
  objectResult ? code.replace("await host(i)", "(await host(i)).n").replace("+= host(i)", "+= host(i).n") : code;
const PARKED_CALLS = 100;

// Each case: a sandbox with its host function, and the timed run. `--cases=a,b` runs only those.
const CASES = {
  syncHost: () => {
    const sb = new Sandbox();
    sb.defineFunction("host", objectResult ? (i) => ({ n: hostSync(i) }) : hostSync);
    const code = asObjects(guestSource("sync-host-calls.js"));
    return [sb, () => time("syncHost", () => sb.evalSync(code))];
  },
  awaitedHost: () => awaitedCase("awaitedHost", {}),
  // The same eval inline (on this thread): each settle resumes the guest at once, with no thread hand-over.
  inlineAwaitedHost: () => awaitedCase("inlineAwaitedHost", { inline: true }),
  parkedSyncHost: () => {
    const sb = new Sandbox();
    sb.defineFunction("host", (a) => a.length);
    const code = `(() => {
  const a = Array.from({ length: 4096 }, (_, i) => i);
  let s = 0;
  for (let i = 0; i < ${PARKED_CALLS}; i++) s += host(a);
  return s;
})()`;
    return [sb, () => time("parkedSyncHost", () => sb.eval(code), PARKED_CALLS, PARKED_CALLS * 4096)];
  },
};

function awaitedCase(name, options) {
  const sb = new Sandbox();
  sb.defineAsyncFunction("host", objectResult ? async ([i]) => ({ n: await hostAsync(i) }) : ([i]) => hostAsync(i));
  const code = `await (${asObjects(guestSource("async-host-calls.js"))})`;
  return [sb, () => time(name, () => sb.eval(code, options))];
}

const chosen =
  args
    .find((a) => a.startsWith("--cases="))
    ?.slice("--cases=".length)
    .split(",") ?? Object.keys(CASES);
const wallUs = {};
for (const name of chosen) {
  if (!CASES[name]) throw new Error(`unknown case ${name}; known: ${Object.keys(CASES).join(", ")}`);
  const [sb, run] = CASES[name]();
  wallUs[name] = Number((await run()).toFixed(4));
  sb.dispose();
}
console.log(JSON.stringify({ checkout: root, rounds, result: objectResult ? "object" : "number", wallUs, cpuUs }));
