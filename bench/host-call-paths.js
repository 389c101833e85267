#!/usr/bin/env node
// The two hot host-call paths alone, for before/after comparisons of a change to the boundary:
// `node bench/host-call-paths.js [CHECKOUT] [--rounds=N]` loads CHECKOUT's build (dist/ and
// build/Release; default this checkout) and prints the median time per call of the "sync-host"
// and "async-host" workloads of the full bench (10,000 calls of `host(i)` in one eval, sync and
// awaited). Run it for two checkouts in alternating order (A B A B) and compare the medians: one
// process's median moves by several percent from one process to the next on a shared machine.
// `--result=object` has both host functions answer `{ n: i + 1 }` instead of the number (the
// guest sums `.n`): the path of a result encoded through the codec rather than as a number.
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

async function time(op) {
  for (let i = 0; i < Math.max(5, rounds / 10); i++) await op(); // warm-up
  const samples = [];
  for (let i = 0; i < rounds; i++) {
    const started = performance.now();
    const sum = await op();
    samples.push(performance.now() - started);
    if (sum !== HOST_CALL_SUM) throw new Error(`wrong sum ${sum}`);
  }
  return (median(samples) * 1000) / CALLS;
}

const sync = new Sandbox();
sync.defineFunction("host", objectResult ? (i) => ({ n: hostSync(i) }) : hostSync);
const asObjects = (code) =>
  objectResult ? code.replace("await host(i)", "(await host(i)).n").replace("+= host(i)", "+= host(i).n") : code;
const syncCode = asObjects(guestSource("sync-host-calls.js"));
const syncUs = await time(() => sync.evalSync(syncCode));

const awaited = new Sandbox();
awaited.defineAsyncFunction("host", objectResult ? async ([i]) => ({ n: await hostAsync(i) }) : ([i]) => hostAsync(i));
const asyncCode = `await (${asObjects(guestSource("async-host-calls.js"))})`;
const asyncUs = await time(() => awaited.eval(asyncCode));

console.log(
  JSON.stringify({
    checkout: root,
    rounds,
    result: objectResult ? "object" : "number",
    syncHostUs: Number(syncUs.toFixed(4)),
    awaitedHostUs: Number(asyncUs.toFixed(3)),
  }),
);
sync.dispose();
awaited.dispose();
