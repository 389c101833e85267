// Where the Node main thread spends its time while the middleware's eval tool takes a large code
// argument: CPU profile (node:inspector) of the tool calls alone, self time per function, plus
// the GC pauses and the longest gap of a 5 ms timer. Run after `npm run build:ts`:
//   node scripts/profile-eval-stall.mjs [--bytes=1048576] [--runs=5] [--lang=ts|js] [--bare]
// --bare: a LangChain tool of the eval tool's schema that does nothing, for LangChain's own share.
import { Session } from "node:inspector/promises";
import { PerformanceObserver } from "node:perf_hooks";
import { createRequire } from "node:module";
import { pathToFileURL } from "node:url";

const arg = (name, fallback) => process.argv.find((a) => a.startsWith(`--${name}=`))?.split("=")[1] ?? fallback;
const bytes = Number(arg("bytes", 1024 * 1024));
const runs = Number(arg("runs", 5));
const lang = arg("lang", "ts");
const root = new URL("../", import.meta.url);
const lc = await import(pathToFileURL(new URL("dist/langchain/index.js", root).pathname).href);
const middleware = lc.createCodeInterpreterMiddleware({
  executionTimeoutMs: 5000,
  maxCodeBytes: Math.max(bytes, 1024) * 2,
});
const { tool: makeTool } = createRequire(new URL("package.json", root))("@langchain/core/tools");
const tool = process.argv.includes("--bare")
  ? makeTool(async () => "ok", { name: "eval", description: "nothing", schema: middleware.tools[0].schema })
  : middleware.tools[0];

const line = lang === "ts" ? (i) => `const v${i}: number = ${i};` : (i) => `var j${i} = ${i} + 1;`;
const lines = [];
for (let i = 0, size = 0; size + line(i).length + 1 <= bytes; i++) {
  lines.push(line(i));
  size += line(i).length + 1;
}
const code = lines.join("\n");
let thread = 0;
const call = () => tool.invoke({ code }, { configurable: { thread_id: `profile-${thread++}` } });
await call(); // warm: worker, TypeScript, first sandbox

const gcs = [];
new PerformanceObserver((list) => gcs.push(...list.getEntries().map((e) => e.duration))).observe({
  entryTypes: ["gc"],
});
const session = new Session();
session.connect();
await session.post("Profiler.enable");
await session.post("Profiler.setSamplingInterval", { interval: 200 });
await session.post("Profiler.start");
const gaps = [];
for (let r = 0; r < runs; r++) {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last - 5);
    last = now;
  }, 5);
  await new Promise((resolve) => setTimeout(resolve, 20));
  last = performance.now();
  longest = 0;
  await call();
  await new Promise((resolve) => setTimeout(resolve, 20));
  clearInterval(timer);
  gaps.push(longest);
}
const { profile } = await session.post("Profiler.stop");
middleware.dispose();

const self = new Map();
profile.samples.forEach((id, i) => {
  self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0));
});
const totals = new Map();
for (const node of profile.nodes) {
  const { functionName, url, lineNumber } = node.callFrame;
  const key = `${functionName || "(anonymous)"} ${url.split("/").slice(-2).join("/")}:${lineNumber + 1}`;
  totals.set(key, (totals.get(key) ?? 0) + (self.get(node.id) ?? 0));
}
const sorted = (xs) => [...xs].sort((a, b) => a - b);
console.log(
  `${lang}, ${code.length} bytes, ${runs} calls; longest timer gap per call (ms): ${sorted(gaps)
    .map((g) => g.toFixed(1))
    .join(", ")}`,
);
console.log(
  `GC pauses during the calls: ${gcs.length}, longest ${Math.max(0, ...gcs).toFixed(1)} ms, total ${gcs.reduce((a, b) => a + b, 0).toFixed(1)} ms`,
);
console.log("self time on the main thread, all calls (ms):");
for (const [key, us] of [...totals]
  .filter(([k]) => !k.startsWith("(idle)"))
  .sort((a, b) => b[1] - a[1])
  .slice(0, 20))
  console.log(`${(us / 1000).toFixed(1).padStart(8)}  ${key}`);

// The call paths of the heaviest frames (their callers, innermost first).
const parentOf = new Map();
for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node);
const paths = new Map();
for (const node of profile.nodes) {
  const us = self.get(node.id) ?? 0;
  if (us === 0 || node.callFrame.functionName === "(idle)") continue;
  const chain = [];
  for (let n = node; n !== undefined && chain.length < 8; n = parentOf.get(n.id))
    chain.push(
      `${n.callFrame.functionName || "(anonymous)"}@${n.callFrame.url.split("/").slice(-1)[0]}:${n.callFrame.lineNumber + 1}`,
    );
  const key = chain.join(" < ");
  paths.set(key, (paths.get(key) ?? 0) + us);
}
console.log("heaviest call paths (ms):");
for (const [key, us] of [...paths].sort((a, b) => b[1] - a[1]).slice(0, 12))
  console.log(`${(us / 1000).toFixed(1).padStart(8)}  ${key}`);

// The longest stretches without an idle sample (what a timer waits behind), with their heaviest frames.
const byId = new Map(profile.nodes.map((node) => [node.id, node]));
const stretches = [];
let current;
profile.samples.forEach((id, i) => {
  const node = byId.get(id);
  const idle = node.callFrame.functionName === "(idle)";
  if (idle || node.callFrame.url.endsWith("inspector")) {
    if (current) stretches.push(current);
    current = undefined;
    return;
  }
  current ??= { us: 0, frames: new Map() };
  current.us += profile.timeDeltas[i] ?? 0;
  const chain = [];
  for (let n = node; n !== undefined && chain.length < 4; n = parentOf.get(n.id))
    chain.push(
      `${n.callFrame.functionName || "(anonymous)"}@${n.callFrame.url.split("/").slice(-1)[0]}:${n.callFrame.lineNumber + 1}`,
    );
  const key = chain.join(" < ");
  current.frames.set(key, (current.frames.get(key) ?? 0) + (profile.timeDeltas[i] ?? 0));
});
console.log("longest busy stretches of the main thread (ms), with their heaviest frames:");
for (const s of stretches.sort((a, b) => b.us - a.us).slice(0, 6)) {
  console.log(`${(s.us / 1000).toFixed(1).padStart(8)}`);
  for (const [key, us] of [...s.frames].sort((a, b) => b[1] - a[1]).slice(0, 4))
    console.log(`            ${(us / 1000).toFixed(1)}  ${key}`);
}
