#!/usr/bin/env node
// Host memory held by async host calls in flight (issue 27, item 8): `node --expose-gc
// bench/host-calls-in-flight-memory.js [CHECKOUT]` loads CHECKOUT's build (default this checkout),
// has a 64 MiB guest call a slow, well-behaved async host function in an endless loop without
// awaiting it, and prints how the eval ended, how many calls reached the host and the peak growth
// of the process's RSS (sampled every 20 ms and at the end).
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const root = resolve(process.argv[2] ?? new URL("..", import.meta.url).pathname);
const { Sandbox } = await import(pathToFileURL(`${root}/dist/index.js`).href);
const sb = new Sandbox({ memoryLimitBytes: 64 * 1024 * 1024 });
let calls = 0;
let peak = 0;
globalThis.gc?.();
const base = process.memoryUsage().rss;
const sample = () => {
  peak = Math.max(peak, process.memoryUsage().rss - base);
};
const sampler = setInterval(sample, 20);
sb.defineAsyncFunction("h", () => {
  calls++;
  return new Promise((done) => setTimeout(done, 60_000, 1).unref());
});
const report = await sb.run("for (let i = 0; ; i++) h(i)");
sample();
clearInterval(sampler);
console.log(
  JSON.stringify({
    checkout: root,
    outcome: report.ok ? "ok" : report.error.code,
    calls,
    peakRssMiB: Math.round(peak / 2 ** 20),
  }),
);
sb.dispose();
process.exit(0);
