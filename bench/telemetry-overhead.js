#!/usr/bin/env node
// The cost of telemetry on the hot paths (issue 32, item 5): `evalSync("1+1")`, 10,000 sync host
// calls in one eval, and the eval tool end to end, for this checkout against a built baseline
// checkout, each in its own process, in alternating order (AB, BA, AB), read by the median of the
// per-round ratios of medians (one process's median moves by more than the effect measured).
//
//   node bench/telemetry-overhead.js --baseline=PATH [--otel] [--rounds=3] [--cases=eval-sync,sync-host,eval-tool]
//   node bench/telemetry-overhead.js --sdk-vs-none [--rounds=3] [--cases=...]
//   node bench/telemetry-overhead.js --interleaved [--root=PATH] [--blocks=30] [--cases=...,eval-async]
//
// --sdk-vs-none times this checkout with the OpenTelemetry SDK registered against this checkout
// without it (issue 32 item 5: "with the OTel SDK ... within 10%"), alternating likewise.
//
// `--fixed=ROOT --cases=CASE` runs a fixed amount of one case's work against the checkout at ROOT
// and exits, for timing whole processes from outside, pairwise A B A B (e.g. hyperfine, or any
// ABAB timer): 400,000 `evalSync("1+1")`, 300 evals of 10,000 sync host calls, or 1,000 eval tool calls.
//
// --interleaved times one checkout (this one, or the built checkout at --root) in ONE process,
// registering the OpenTelemetry SDK and removing it again block by block (ABAB ... then BABA), and
// reports per case: the caller's latency (median of the blocks' medians), and the main thread's CPU
// time per operation measured over whole blocks (Linux /proc schedstat; process CPU elsewhere),
// which includes the span and metric work handed to the SDK after the caller has its answer (each
// block waits for it before its clock stops). Ratios are medians of the per-block-pair ratios: on a
// loaded machine, neighbouring blocks see the same load where separate processes do not.
//
// --otel registers the OpenTelemetry SDK (bench/lib/otel-sdk.js: a BatchSpanProcessor over an
// in-memory exporter, a meter provider with an in-memory reader, an AsyncLocalStorage context
// manager) in both processes: the baseline has no telemetry, so its ratio is the SDK's cost here.
// Without it nothing is registered and nothing subscribes: the ratio is what the publishing point's
// checks cost.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { performance } from "node:perf_hooks";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";

const self = fileURLToPath(import.meta.url);
const here = resolve(fileURLToPath(new URL("../", import.meta.url)));
const args = process.argv.slice(2);
const arg = (name) => args.find((a) => a.startsWith(`--${name}=`))?.slice(name.length + 3);
const ALL_CASES = ["eval-sync", "sync-host", "eval-tool"];

/** The checkout at `root` loaded through the bench's adapter. */
async function loadAdapter(root) {
  const { nativeAdapter } = await import(`${here}/bench/engines/quickjs-native.js`);
  const adapter = nativeAdapter({ id: "q", label: "q", root: `${root}/`, checkout: root });
  await adapter.load();
  return adapter;
}

/** One case's operation: `run()` (a promise for the eval tool, a value otherwise) and `dispose()`. */
async function openCase(adapter, name) {
  const { guestSource } = await import(`${here}/bench/workloads/sources.js`);
  const { hostSync } = await import(`${here}/bench/workloads/host-functions.js`);
  if (name === "eval-tool") {
    const tool = await adapter.createEvalTool();
    const code = guestSource("eval-tool-call.js");
    return { run: () => tool.invoke(code), dispose: () => tool.dispose() };
  }
  const s = name === "sync-host" ? adapter.createSession({ sync: { host: hostSync } }) : adapter.createSession();
  const code = guestSource(name === "sync-host" ? "sync-host-calls.js" : "one-plus-one.js");
  // eval-async (--interleaved only): `await eval("1+1")` on the eval's thread, the eval tool's engine step alone.
  if (name === "eval-async") return { run: () => s.evalAsync(code), dispose: () => s.dispose() };
  return { run: () => s.evalSync(code), dispose: () => s.dispose() };
}

async function child(root, otel, cases) {
  if (otel) (await import("./lib/otel-sdk.js")).registerOtelSdk();
  const { measure } = await import(`${here}/bench/lib/measure.js`);
  const adapter = await loadAdapter(root);
  const out = {};
  for (const name of cases) {
    const c = await openCase(adapter, name);
    // measure() times an AsyncFunction as async, anything else as sync.
    const fn = name === "eval-tool" || name === "eval-async" ? async () => c.run() : () => c.run();
    out[name] = (await measure(name, fn, { quick: false })).medianUs / (name === "sync-host" ? 10_000 : 1);
    c.dispose();
  }
  process.stdout.write(`${JSON.stringify(out)}\n`);
  process.exit(0);
}

const FIXED_RUNS = { "eval-sync": 400_000, "sync-host": 300, "eval-tool": 1000 };

async function fixed(root, otel, name) {
  if (otel) (await import("./lib/otel-sdk.js")).registerOtelSdk();
  const c = await openCase(await loadAdapter(root), name);
  const runs = FIXED_RUNS[name];
  if (name === "eval-tool") for (let i = 0; i < runs; i++) await c.run();
  else for (let i = 0; i < runs; i++) c.run();
  c.dispose();
  process.exit(0);
}

const INTERLEAVED_BLOCK = { "eval-sync": 2000, "sync-host": 10, "eval-tool": 30, "eval-async": 200 };

/** This thread's CPU time in µs (Linux: schedstat of the main thread, ns precision). */
function mainThreadCpuUs() {
  try {
    return Number(readFileSync(`/proc/self/task/${process.pid}/schedstat`, "utf8").split(" ")[0]) / 1000;
  } catch {
    const u = process.cpuUsage();
    return u.user + u.system;
  }
}

async function interleaved(root, cases, blocks) {
  const sdk = (await import("./lib/otel-sdk.js")).otelSdkSwitch();
  const adapter = await loadAdapter(root);
  const nextTurn = () => new Promise((done) => setImmediate(done));
  console.log(
    `telemetry cost, ${root}: OpenTelemetry SDK registered / not, alternating in one process, ${blocks} blocks each`,
  );
  console.log(
    "| case | latency no SDK (µs) | latency SDK (µs) | latency ratio | main-thread CPU no SDK (µs/op) | CPU SDK (µs/op) | CPU ratio |",
  );
  console.log("|---|---|---|---|---|---|---|");
  for (const name of cases) {
    const { run, dispose } = await openCase(adapter, name);
    const per = INTERLEAVED_BLOCK[name];
    const out = { none: { lat: [], cpu: [] }, sdk: { lat: [], cpu: [] } };
    for (let b = 0; b < blocks; b++) {
      for (const variant of b % 2 === 0 ? ["none", "sdk"] : ["sdk", "none"]) {
        if (variant === "sdk") sdk.on();
        else sdk.off();
        for (let i = 0; i < Math.max(3, per / 10); i++) await run(); // a new registration's first evals, untimed
        await nextTurn();
        const cpu0 = mainThreadCpuUs();
        const lat = [];
        for (let i = 0; i < per; i++) {
          const t0 = performance.now();
          const pending = run();
          if (pending instanceof Promise) await pending;
          lat.push((performance.now() - t0) * 1000);
          await null; // after an evalSync, the work deferred until its caller has the answer runs here, off the timer
        }
        await nextTurn();
        out[variant].cpu.push((mainThreadCpuUs() - cpu0) / per);
        out[variant].lat.push(median(lat));
      }
    }
    sdk.off();
    dispose();
    const ratio = (k) => median(out.sdk[k].map((x, i) => x / out.none[k][i]));
    const unit = name === "sync-host" ? " (per eval of 10,000 calls)" : "";
    console.log(
      `| ${name}${unit} | ${median(out.none.lat).toFixed(2)} | ${median(out.sdk.lat).toFixed(2)} | ${ratio("lat").toFixed(3)} | ${median(out.none.cpu).toFixed(2)} | ${median(out.sdk.cpu).toFixed(2)} | ${ratio("cpu").toFixed(3)} |`,
    );
  }
  process.exit(0);
}

function runChild(root, otel, cases) {
  const r = spawnSync(
    process.execPath,
    ["--expose-gc", self, `--child=${root}`, ...(otel ? ["--otel"] : []), `--cases=${cases.join(",")}`],
    { encoding: "utf8", cwd: here },
  );
  if (r.status !== 0) throw new Error(`child for ${root} failed: ${r.stderr}`);
  return JSON.parse(r.stdout.trim().split("\n").at(-1));
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function main() {
  const cases = (arg("cases") ?? ALL_CASES.join(",")).split(",");
  const otel = args.includes("--otel");
  if (arg("child") !== undefined) return child(arg("child"), otel, cases);
  if (arg("fixed") !== undefined) return fixed(arg("fixed"), otel, cases[0]);
  if (args.includes("--interleaved"))
    return interleaved(resolve(arg("root") ?? here), cases, Number(arg("blocks") ?? 30));
  const baseline = arg("baseline");
  const sdkVsNone = args.includes("--sdk-vs-none");
  if (baseline === undefined && !sdkVsNone)
    throw new Error("--baseline=PATH (a built checkout) or --sdk-vs-none is required");
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
  const what = sdkVsNone
    ? " (this checkout with the OpenTelemetry SDK registered against it without)"
    : otel
      ? " (OpenTelemetry SDK registered in both, in-memory exporter)"
      : " (nothing registered, nothing subscribed)";
  console.log(`telemetry overhead${what}, ${rounds} alternating rounds`);
  console.log(`| case | this (µs) | ${sdkVsNone ? "no SDK" : "baseline"} (µs) | ratio (median) | rounds |`);
  console.log("|---|---|---|---|---|");
  for (const c of cases) {
    const unit = c === "sync-host" ? " per call" : "";
    console.log(
      `| ${c}${unit} | ${median(medians[c].this).toFixed(3)} | ${median(medians[c].baseline).toFixed(3)} | ${median(ratios[c]).toFixed(3)} | ${ratios[c].map((r) => r.toFixed(3)).join(", ")} |`,
    );
  }
}

await main();
