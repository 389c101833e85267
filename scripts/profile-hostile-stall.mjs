// Where the Node main thread's longest stalls go while one class of the bench's hostile case runs
// (bench/lib/hostile-case.js, approval-stall.js, hostile-code-argument.js). Run after `npm run build:ts`:
//   node scripts/profile-hostile-stall.mjs --case=<part of a title> [--runs=3] [--no-profile]
// Per run, between two ticks of a 5 ms timer:
// - the longest wall gap beyond the period (what the bench reports; it grows with the machine's load);
// - the most CPU time the main thread spent in one interval between two ticks (from
//   /proc/self/task/<pid>/schedstat, Linux): what the loop was busy with while the timer waited,
//   independent of how many other processes share the cores. Work sliced into chunks that yield
//   to the event loop shows here as about the timer's period plus the longest chunk;
// - with the profiler on, the heaviest call paths sampled inside that busiest interval.
import { readFileSync } from "node:fs";
import { Session } from "node:inspector/promises";
import { pathToFileURL } from "node:url";
import { classes } from "../bench/lib/hostile-case.js";
import { codeArgumentClasses } from "../bench/lib/hostile-code-argument.js";

const arg = (name, fallback) =>
  process.argv.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3) ?? fallback;
const wanted = arg("case", undefined);
const runs = Number(arg("runs", 3));
const profiling = !process.argv.includes("--no-profile");
const TICK_MS = 5;
const root = new URL("../", import.meta.url);
const api = await import(pathToFileURL(new URL("dist/index.js", root).pathname).href);
const lc = await import(pathToFileURL(new URL("dist/langchain/index.js", root).pathname).href);
const hostile = classes(api, lc);
const codeArgument = codeArgumentClasses(lc, root.pathname);
const all = [...hostile.cases, ...codeArgument.cases];
const matching = wanted === undefined ? [] : all.filter(([title]) => title.includes(wanted));
if (matching.length === 0) {
  console.log(`--case=<part of one of these titles>:\n${all.map(([title]) => `  ${title}`).join("\n")}`);
  process.exit(1);
}

const schedstat = `/proc/self/task/${process.pid}/schedstat`;
/** CPU time of the main thread so far (ns), or NaN where /proc does not say. */
const mainThreadCpuNs = () => {
  try {
    return Number(readFileSync(schedstat, "latin1").split(" ")[0]);
  } catch {
    return Number.NaN;
  }
};
const nowUs = () => Number(process.hrtime.bigint() / 1000n); // the clock V8's profile samples use (monotonic)

/** Ticks of a 5 ms timer while `work()` runs: [time µs, main-thread CPU ns] each. */
async function ticksDuring(work) {
  const ticks = [];
  const timer = setInterval(() => ticks.push([nowUs(), mainThreadCpuNs()]), TICK_MS);
  await new Promise((resolve) => setTimeout(resolve, 4 * TICK_MS));
  ticks.length = 0;
  ticks.push([nowUs(), mainThreadCpuNs()]);
  let outcome;
  try {
    outcome = await work();
  } catch (error) {
    outcome = `threw ${error?.code ?? error?.name}: ${String(error?.message).slice(0, 120)}`;
  }
  await new Promise((resolve) => setTimeout(resolve, 4 * TICK_MS));
  clearInterval(timer);
  return {
    ticks,
    outcome: String(outcome?.content ?? outcome)
      .replace(/\s+/g, " ")
      .slice(0, 80),
  };
}

function intervals(ticks) {
  return ticks.slice(1).map(([t, cpu], i) => ({
    from: ticks[i][0],
    to: t,
    gapMs: (t - ticks[i][0]) / 1000 - TICK_MS,
    cpuMs: (cpu - ticks[i][1]) / 1e6,
  }));
}

function heaviestPaths(profile, from, to) {
  const byId = new Map(profile.nodes.map((node) => [node.id, node]));
  const parentOf = new Map();
  for (const node of profile.nodes) for (const child of node.children ?? []) parentOf.set(child, node);
  const paths = new Map();
  let at = profile.startTime;
  profile.samples.forEach((id, i) => {
    at += profile.timeDeltas[i] ?? 0;
    if (at < from || at > to) return;
    const chain = [];
    for (let n = byId.get(id); n !== undefined && chain.length < 6; n = parentOf.get(n.id)) {
      if (n.callFrame.functionName === "(root)") break;
      chain.push(
        `${n.callFrame.functionName || "(anonymous)"}@${n.callFrame.url.split("/").slice(-1)[0]}:${n.callFrame.lineNumber + 1}`,
      );
    }
    const key = chain.join(" < ");
    paths.set(key, (paths.get(key) ?? 0) + 1);
  });
  return [...paths].sort((a, b) => b[1] - a[1]).slice(0, 10);
}

const session = new Session();
session.connect();
if (profiling) {
  await session.post("Profiler.enable");
  await session.post("Profiler.setSamplingInterval", { interval: 100 });
}
for (const [title, prepare] of matching) {
  await (await prepare())(); // one-time costs (first sandbox, the transform worker) are not measured
  console.log(`\n${title}`);
  for (let r = 0; r < runs; r++) {
    const work = await prepare();
    if (profiling) await session.post("Profiler.start");
    const { ticks, outcome } = await ticksDuring(work);
    const profile = profiling ? (await session.post("Profiler.stop")).profile : undefined;
    const spans = intervals(ticks);
    const longest = spans.reduce((a, b) => (b.gapMs > a.gapMs ? b : a), spans[0]);
    const busiest = spans.reduce((a, b) => (b.cpuMs > a.cpuMs ? b : a), spans[0]);
    console.log(
      `  run ${r + 1}: ${spans.length} ticks; longest gap ${longest.gapMs.toFixed(1)} ms (main thread busy ${longest.cpuMs.toFixed(1)} ms of it); busiest interval ${busiest.cpuMs.toFixed(1)} ms of main-thread CPU (${(busiest.to - busiest.from) / 1000} ms wall); ${outcome}`,
    );
    if (profile !== undefined) {
      for (const [path, samples] of heaviestPaths(profile, busiest.from, busiest.to))
        console.log(`    ${String(samples).padStart(5)} samples  ${path}`);
    }
  }
}
hostile.dispose();
codeArgument.dispose();
