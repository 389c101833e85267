// The Node main thread's busiest 5 ms interval while a guest awaits an async host function (a PTC
// tool) whose result is large: a string of `--mb` megabytes (default 30) or `--rows` rows. Main-thread
// CPU per interval is read from /proc/self/task/<pid>/schedstat (Linux), which other processes on
// the machine do not inflate, as in scripts/profile-hostile-stall.mjs. Run after `npm run build:ts`:
//   node scripts/host-result-stall.mjs [ROOT] [--mb=30 | --rows=300000] [--runs=5]
// ROOT is a built checkout (default: this one), so two builds can be compared run for run.
import { readFileSync } from "node:fs";
import { resolve } from "node:path";
import { pathToFileURL } from "node:url";

const args = process.argv.slice(2);
const option = (name, fallback) =>
  Number(args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback);
const root = resolve(args.find((a) => !a.startsWith("--")) ?? new URL("../", import.meta.url).pathname);
const rows = option("rows", 0);
const mb = option("mb", 30);
const runs = option("runs", 5);
const TICK_MS = 5;
const { Sandbox } = await import(pathToFileURL(`${root}/dist/index.js`).href);

const schedstat = `/proc/self/task/${process.pid}/schedstat`;
const mainThreadCpuNs = () => Number(readFileSync(schedstat, "latin1").split(" ")[0]);
const result =
  rows > 0
    ? Array.from({ length: rows }, (_, i) => ({ id: i, name: `row ${i}`, done: i % 2 === 0 }))
    : "<".padEnd(mb * 1024 * 1024, "x");

async function once() {
  const sb = new Sandbox({ memoryLimitBytes: 1024 * 1024 * 1024, executionTimeoutMs: 60_000 });
  sb.defineAsyncFunction("fetchPage", async () => result);
  const ticks = [];
  const timer = setInterval(() => ticks.push([performance.now(), mainThreadCpuNs()]), TICK_MS);
  await new Promise((r) => setTimeout(r, 4 * TICK_MS));
  ticks.length = 0;
  ticks.push([performance.now(), mainThreadCpuNs()]);
  const value = await sb.eval("const page = await fetchPage(); page.length");
  await new Promise((r) => setTimeout(r, 4 * TICK_MS));
  clearInterval(timer);
  sb.dispose();
  let busiestMs = 0;
  let longestGapMs = 0;
  for (let i = 1; i < ticks.length; i++) {
    busiestMs = Math.max(busiestMs, (ticks[i][1] - ticks[i - 1][1]) / 1e6);
    longestGapMs = Math.max(longestGapMs, ticks[i][0] - ticks[i - 1][0] - TICK_MS);
  }
  return { value, busiestMs, longestGapMs };
}

await once(); // first sandbox, warm-up
const busiest = [];
for (let r = 0; r < runs; r++) {
  const { value, busiestMs, longestGapMs } = await once();
  busiest.push(busiestMs);
  console.log(
    `run ${r + 1}: busiest interval ${busiestMs.toFixed(1)} ms of main-thread CPU; longest gap ${longestGapMs.toFixed(1)} ms; guest saw length ${value}`,
  );
}
busiest.sort((a, b) => a - b);
console.log(
  `${root}: ${rows > 0 ? `${rows} rows` : `${mb} MB string`}: median busiest interval ${busiest[Math.floor(runs / 2)].toFixed(1)} ms`,
);
