// Bytes of JavaScript heap allocated per `await sb.eval("1+1")` on the main thread, by allocating
// function (V8's sampling heap profiler, young-generation garbage included), after 2,000 warm-up
// evals. A count that load does not distort, unlike times. Run after `npm run build:ts`:
//   node scripts/eval-allocations.mjs [--evals=2000] [--top=20]
// Why it matters (issue 28, batch spread): in a fresh process the slow batches of 200 evals follow
// the eval count, not time or V8's tiering (same positions with 30 ms pauses between batches, and
// with --no-opt --no-sparkplug), and they follow the young generation's size: none is slow with
// `--max-semi-space-size=1`, every one is with 32-64 MB semi-spaces. How the size slows them is
// not settled: the main thread takes under one page fault per eval in slow and fast batches alike.
// What this path allocates per eval is the lever the young generation's growth depends on.
import { Session } from "node:inspector/promises";
import { pathToFileURL } from "node:url";

const arg = (name, fallback) =>
  Number(process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback);
const evals = arg("evals", 2000);
const top = arg("top", 20);
const api = await import(pathToFileURL(new URL("../dist/index.js", import.meta.url).pathname).href);

const sb = new api.Sandbox();
for (let i = 0; i < 2000; i++) await sb.eval("1+1");
const session = new Session();
session.connect();
await session.post("HeapProfiler.enable");
await session.post("HeapProfiler.startSampling", {
  samplingInterval: 64,
  includeObjectsCollectedByMinorGC: true,
  includeObjectsCollectedByMajorGC: true,
});
for (let i = 0; i < evals; i++) await sb.eval("1+1");
const { profile } = await session.post("HeapProfiler.stopSampling");
sb.dispose();

const bySite = new Map();
let total = 0;
const frame = (node) =>
  `${node.callFrame.functionName || "(anonymous)"}@${node.callFrame.url.split("/").pop()}:${node.callFrame.lineNumber + 1}`;
const walk = (node, callers) => {
  const path = [...callers, frame(node)];
  if (node.selfSize > 0) {
    const key = path.slice(-3).reverse().join(" < ");
    bySite.set(key, (bySite.get(key) ?? 0) + node.selfSize);
    total += node.selfSize;
  }
  for (const child of node.children) walk(child, path);
};
walk(profile.head, []);
console.log(`${(total / evals).toFixed(0)} bytes allocated per eval (sampled over ${evals} evals)`);
for (const [site, bytes] of [...bySite].sort((a, b) => b[1] - a[1]).slice(0, top))
  console.log(`${(bytes / evals).toFixed(0).padStart(6)}  ${site}`);
process.exit(0);
