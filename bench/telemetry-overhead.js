#!/usr/bin/env node
// The cost of telemetry on the hot paths (issue 32, item 5): `evalSync("1+1")`, 10,000 sync host
// calls in one eval, and the eval tool end to end, for this checkout against a built baseline
// checkout, each in its own process, in alternating order (AB, BA, AB), read by the median of the
// per-round ratios of medians (one process's median moves by more than the effect measured).
//
//   node bench/telemetry-overhead.js --baseline=PATH [--otel] [--rounds=3] [--cases=eval-sync,sync-host,eval-tool]
//   node bench/telemetry-overhead.js --sdk-vs-none [--rounds=3] [--cases=...]
//
// --sdk-vs-none times this checkout with the OpenTelemetry SDK registered against this checkout
// without it (issue 32 item 5: "with the OTel SDK ... within 10%"), alternating likewise.
//
// `--fixed=ROOT --cases=CASE` runs a fixed amount of one case's work against the checkout at ROOT
// and exits, for timing whole processes from outside, pairwise A B A B (e.g. hyperfine, or any
// ABAB timer): 400,000 `evalSync("1+1")`, 300 evals of 10,000 sync host calls, or 1,000 eval tool calls.
//
// --otel registers the OpenTelemetry SDK (bench/lib/otel-sdk.js: a BatchSpanProcessor over an
// in-memory exporter, a meter provider with an in-memory reader, an AsyncLocalStorage context
// manager) in both processes: the baseline has no telemetry, so its ratio is the SDK's cost here.
// Without it nothing is registered and nothing subscribes: the ratio is what the publishing point's
// checks cost.
import { spawnSync } from "node:child_process";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";

const self = fileURLToPath(import.meta.url);
const here = resolve(fileURLToPath(new URL("../", import.meta.url)));
const args = process.argv.slice(2);
const arg = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const ALL_CASES = ["eval-sync", "sync-host", "eval-tool"];

async function child(root, otel, cases) {
  if (otel) (await import("./lib/otel-sdk.js")).registerOtelSdk();
  const { nativeAdapter } = await import(`${here}/bench/engines/quickjs-native.js`);
  const { measure } = await import(`${here}/bench/lib/measure.js`);
  const { guestSource } = await import(`${here}/bench/workloads/sources.js`);
  const { hostSync } = await import(`${here}/bench/workloads/host-functions.js`);
  const adapter = nativeAdapter({ id: "q", label: "q", root: `${root}/`, checkout: root });
  await adapter.load();
  const out = {};
  for (const name of cases) {
    if (name === "eval-sync") {
      const s = adapter.createSession();
      const code = guestSource("one-plus-one.js");
      out[name] = (await measure(name, () => s.evalSync(code), { quick: false })).medianUs;
      s.dispose();
    } else if (name === "sync-host") {
      const s = adapter.createSession({ sync: { host: hostSync } });
      const code = guestSource("sync-host-calls.js");
      out[name] = (await measure(name, () => s.evalSync(code), { quick: false })).medianUs / 10_000;
      s.dispose();
    } else if (name === "eval-tool") {
      const tool = await adapter.createEvalTool();
      const code = guestSource("eval-tool-call.js");
      out[name] = (await measure(name, async () => tool.invoke(code), { quick: false })).medianUs;
      tool.dispose();
    }
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exit(0);
}

const FIXED_RUNS = { "eval-sync": 400_000, "sync-host": 300, "eval-tool": 1000 };

async function fixed(root, otel, name) {
  if (otel) (await import("./lib/otel-sdk.js")).registerOtelSdk();
  const { nativeAdapter } = await import(`${here}/bench/engines/quickjs-native.js`);
  const { guestSource } = await import(`${here}/bench/workloads/sources.js`);
  const { hostSync } = await import(`${here}/bench/workloads/host-functions.js`);
  const adapter = nativeAdapter({ id: "q", label: "q", root: `${root}/`, checkout: root });
  await adapter.load();
  const runs = FIXED_RUNS[name];
  if (name === "eval-tool") {
    const tool = await adapter.createEvalTool();
    const code = guestSource("eval-tool-call.js");
    for (let i = 0; i < runs; i++) await tool.invoke(code);
    tool.dispose();
  } else {
    const s = name === "sync-host" ? adapter.createSession({ sync: { host: hostSync } }) : adapter.createSession();
    const code = guestSource(name === "sync-host" ? "sync-host-calls.js" : "one-plus-one.js");
    for (let i = 0; i < runs; i++) s.evalSync(code);
    s.dispose();
  }
  process.exit(0);
}

function runChild(root, otel, cases) {
  const r = spawnSync(process.execPath, ["--expose-gc", self, `--child=${root}`, ...(otel ? ["--otel"] : []), `--cases=${cases.join(",")}`], { encoding: "utf8", cwd: here });
  if (r.status !== 0) throw new Error(`child for ${root} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").at(-1));
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const cases = (arg("cases") ?? ALL_CASES.join(",")).split(",");
  const otel = args.includes("--otel");
  if (arg("child") !== undefined) return child(arg("child"), otel, cases);
  if (arg("fixed") !== undefined) return fixed(arg("fixed"), otel, cases[0]);
  const baseline = arg("baseline");
  const sdkVsNone = args.includes("--sdk-vs-none");
  if (baseline === undefined && !sdkVsNone) throw new Error("--baseline=PATH (a built checkout) or --sdk-vs-none is required");
  const rounds = Number(arg("rounds") ?? 3);
  const ratios = Object.fromEntries(cases.map((c) => [c, []]));
  const medians = Object.fromEntries(cases.map((c) => [c, { this: [], baseline: [] }]));
  // A: this checkout; B: the baseline checkout, or (--sdk-vs-none) this checkout without the SDK.
  const runA = () => runChild(here, otel || sdkVsNone, cases);
  const runB = () => (sdkVsNone ? runChild(here, false, cases) : runChild(resolve(baseline), otel, cases));
  for (let round = 0; round < rounds; round++) {
    let mine;
    let theirs;
    if (round % 2 === 0) {
      mine = runA();
      theirs = runB();
    } else {
      theirs = runB();
      mine = runA();
    }
    for (const c of cases) {
      ratios[c].push(mine[c] / theirs[c]);
      medians[c].this.push(mine[c]);
      medians[c].baseline.push(theirs[c]);
    }
  }
  const what = sdkVsNone ? " (this checkout with the OpenTelemetry SDK registered against it without)" : otel ? " (OpenTelemetry SDK registered in both, in-memory exporter)" : " (nothing registered, nothing subscribed)";
  console.log(`telemetry overhead${what}, ${rounds} alternating rounds`);
  console.log(`| case | this (µs) | ${sdkVsNone ? "no SDK" : "baseline"} (µs) | ratio (median) | rounds |`);
  console.log("|---|---|---|---|---|");
  for (const c of cases) {
    const unit = c === "sync-host" ? " per call" : "";
    console.log(`| ${c}${unit} | ${median(medians[c].this).toFixed(3)} | ${median(medians[c].baseline).toFixed(3)} | ${median(ratios[c]).toFixed(3)} | ${ratios[c].map((r) => r.toFixed(3)).join(", ")} |`);
  }
}

await main();
