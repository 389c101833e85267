#!/usr/bin/env node
// Benchmark driver: `node bench/run.js [--quick] [--engines=id,id] [--modes=mode,mode]`.
// --modes runs only those child modes (timed, otel, memory:100, memory:10000, eventloop, latency,
// hostile, scheduler), e.g.
// `--modes=latency` runs the latency-under-load case alone; like --engines it writes to .work/.
// `otel` (quickjs-native and the baseline only) times eval-sync, sync-host and eval-tool again with
// the OpenTelemetry SDK registered: the rows "… with OpenTelemetry SDK" (issue 32, item 5), e.g.
// `node bench/run.js --engines=quickjs-native --modes=timed,otel --baseline=PATH`.
// The "thread storage" case (bench/thread-storage.js, quickjs-native only, SQLite; PostgreSQL too
// when QJSN_POSTGRES_URL is set) runs in every run that includes quickjs-native, or alone with
// `--modes=thread-storage`.
// The "durable evals" case (bench/durable-evals.js, quickjs-native only, the same checkpointers) runs
// likewise, or alone with `--modes=durable-evals`.
// The "process tier" case (bench/process-tier.js: isolation "process" beside "in-process", each
// figure against its target; Linux) likewise, or alone with `--modes=process-tier`.
// `--only=hostile` is a shorthand for the hostile case alone (see below).
// `--baseline=PATH` also runs the quickjs-native build of another checkout at PATH (built with
// `npm run build`, e.g. a `git worktree` of an older commit) right after this checkout's, and the
// report gains a table of this checkout's medians against the baseline's, both from this one run.
// The timed cases of the two then run in BASELINE_ROUNDS pairs of processes, in alternating order
// (AB, BA, AB): a single process's median of the eval tool case moves by up to 15% from one process
// to the next, more than the 5% the table is read against; the table gives the median ratio.
// Installs bench deps if needed, builds the raw-C floor, runs each engine's cases in child
// processes of their own, then writes bench/RESULTS.md and bench/chart.svg from this one run
// (a --quick, --engines or --modes run writes them under bench/.work/ instead).
// Timing never fails the run: an engine or case that cannot run is reported with its reason.
import { spawn } from "node:child_process";
import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { resolve } from "node:path";
import { fileURLToPath } from "node:url";
import { ensureBenchDeps } from "./lib/deps.js";
import { buildCFloor, runCFloor, C_FLOOR_FLAGS } from "./lib/c-floor.js";
import { currentLoad, describeMachine } from "./lib/machine.js";
import { BASELINE_ENV, BASELINE_ID, ENGINE_IDS, withBaselineEngine } from "./engines/index.js";

const bench = fileURLToPath(new URL("./", import.meta.url));
const work = `${bench}.work`;
const args = process.argv.slice(2);
const quick = args.includes("--quick");
const engineArg = args.find((a) => a.startsWith("--engines="))?.slice("--engines=".length);
// `--only=hostile`: just the "event loop under hostile outputs" case of quickjs-native, printed
// and written to bench/.work/hostile.json (RESULTS.md is left alone).
const only = args.find((a) => a.startsWith("--only="))?.slice("--only=".length);
const baselineArg = args.find((a) => a.startsWith("--baseline="))?.slice("--baseline=".length);
const engines = withBaseline(engineArg ? engineArg.split(",") : ENGINE_IDS, baselineArg);
const modeArg = args.find((a) => a.startsWith("--modes="))?.slice("--modes=".length);
/** Whether this run includes `mode` (every mode does unless --modes names some). */
const modeRuns = (mode) => !modeArg || modeArg.split(",").includes(mode);
const say = (text) => process.stderr.write(`${text}\n`);
const started = Date.now();
const elapsed = () => `${((Date.now() - started) / 1000).toFixed(0)}s`;

/**
 * Runs `node <nodeArgs>` with its stderr passed through (stdout too, unless `captureStdout`) and a
 * kill after `timeoutMs`. Resolves to its exit code, captured stdout, and `failure(tail)`: a line
 * saying how it ended plus the last lines of `tail` (default: its stderr).
 */
function runNode(nodeArgs, timeoutMs, { captureStdout = false } = {}) {
  return new Promise((resolve) => {
    const child = spawn(process.execPath, nodeArgs, { stdio: ["ignore", captureStdout ? "pipe" : "inherit", "pipe"] });
    let stdout = "";
    let stderrTail = "";
    child.stdout?.on("data", (d) => {
      stdout += d;
    });
    child.stderr.on("data", (d) => {
      process.stderr.write(d);
      stderrTail = (stderrTail + d).slice(-2000);
    });
    const timer = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
    child.on("close", (code, signal) => {
      clearTimeout(timer);
      const how = signal === "SIGKILL" ? `timed out after ${timeoutMs / 1000} s` : `exited with ${code ?? signal}`;
      const failure = (tail = stderrTail) =>
        `${how}: ${tail
          .trim()
          .split("\n")
          .filter((l) => l.trim())
          .slice(-3)
          .join(" | ")
          .slice(0, 400)}`;
      resolve({ code, stdout, failure });
    });
  });
}

/** Runs one child; resolves to its JSON output, or to a failure record with stderr's tail. */
async function runChild(engine, mode) {
  const out = `${work}/${engine}-${mode.replace(":", "-")}.json`;
  const ended = await runNode(
    ["--expose-gc", `${bench}lib/child.js`, engine, mode, out, ...(quick ? ["--quick"] : [])],
    (quick ? 120 : 900) * 1000,
  );
  let tail;
  try {
    const parsed = JSON.parse(readFileSync(out, "utf8"));
    if (!parsed.crashed) return parsed;
    tail = parsed.crashed;
  } catch {
    // No output file: the child died before writing one; report how.
  }
  return { engine, crashed: `${mode} process ${ended.failure(tail)}` };
}

async function runEngine(engine, index) {
  say(`\n[${index + 1}/${engines.length}] ${engine} (${elapsed()})`);
  // The hostile and scheduler cases measure this package alone; the OpenTelemetry rows this package and its baseline.
  const ownOnly = (mode) =>
    (!["hostile", "scheduler"].includes(mode) || engine === "quickjs-native") &&
    (mode !== "otel" || engine.startsWith("quickjs-native"));
  const modes = (
    modeArg
      ? modeArg.split(",")
      : [
          "timed",
          "otel",
          "memory:100",
          ...(quick ? [] : ["memory:10000"]),
          "eventloop",
          "latency",
          "hostile",
          "scheduler",
        ]
  ).filter((mode) => mode !== THREAD_STORAGE && mode !== DURABLE_EVALS && ownOnly(mode));
  const result = { engine, rows: [], problems: [] };
  for (const mode of modes) {
    const out = await runChild(engine, mode);
    result.label ??= out.label;
    result.info ??= out.info;
    if (out.unavailable) {
      result.unavailable = out.unavailable;
      break;
    }
    if (out.crashed) {
      result.problems.push(out.crashed);
      continue;
    }
    result.rows.push(...out.rows);
  }
  return result;
}

const THREAD_STORAGE = "thread-storage";
const DURABLE_EVALS = "durable-evals";
const PROCESS_TIER = "process-tier";
const BASELINE_ROUNDS = 3;

/**
 * The timed rows of this checkout and the baseline, a pair per round: the first from the engine
 * runs already done, the others from further processes, the baseline first in every other round.
 */
async function runBaselineRounds(results) {
  const timedRows = (engine) => results.find((r) => r.engine === engine)?.rows ?? [];
  const rounds = [{ native: timedRows("quickjs-native"), baseline: timedRows(BASELINE_ID) }];
  for (let round = 2; round <= BASELINE_ROUNDS; round++) {
    say(`\n[baseline round ${round}/${BASELINE_ROUNDS}] timed cases (${elapsed()})`);
    const order = round % 2 === 0 ? [BASELINE_ID, "quickjs-native"] : ["quickjs-native", BASELINE_ID];
    const pair = {};
    for (const engine of order) {
      const rows = [];
      for (const mode of ["timed", "otel"].filter(modeRuns)) rows.push(...((await runChild(engine, mode)).rows ?? []));
      pair[engine === "quickjs-native" ? "native" : "baseline"] = rows;
    }
    rounds.push(pair);
  }
  return rounds;
}

/**
 * `engines` with the baseline engine (withBaselineEngine) when `--baseline=PATH` names a built
 * checkout; its path reaches the children through the environment.
 */
function withBaseline(engines, path) {
  if (path === undefined) return engines;
  if (!existsSync(`${resolve(path)}/dist/index.js`))
    throw new Error(`--baseline=${path}: no built checkout there (dist/index.js missing: run \`npm run build\` in it)`);
  process.env[BASELINE_ENV] = resolve(path);
  return withBaselineEngine(engines);
}

/**
 * A checkpointer case of quickjs-native alone (`script` under bench/, on SQLite and on PostgreSQL
 * when QJSN_POSTGRES_URL is set) in a child of its own, its Markdown kept for the report: "thread
 * storage" (three restore processes per state, one in a quick run, keep it under half a minute)
 * and "durable evals" (bench/durable-evals.js).
 */
async function runCheckpointerCase(title, script, runs) {
  say(`\n[${title}] quickjs-native (${elapsed()})`);
  const layouts = ["sqlite", ...(process.env.QJSN_POSTGRES_URL ? ["postgres"] : [])];
  const args = [`${bench}${script}`, "--embedded", `--runs=${runs}`, `--layouts=${layouts.join(",")}`];
  const ended = await runNode(args, (quick ? 120 : 300) * 1000, { captureStdout: true });
  return ended.code === 0 ? { markdown: ended.stdout.trim() } : { failed: ended.failure() };
}

/**
 * The "process tier" case: bench/process-tier.js in a child of its own, both tiers side by side,
 * each figure against its target (issue 30, item 6); its Markdown table kept for the report.
 */
async function runProcessTier() {
  say(`\n[process tier] quickjs-native, both tiers (${elapsed()})`);
  const args = ["--expose-gc", `${bench}process-tier.js`, "--embedded", `--samples=${quick ? 3 : 9}`];
  const ended = await runNode(args, (quick ? 120 : 600) * 1000, { captureStdout: true });
  return ended.code === 0 ? { markdown: ended.stdout.trim() } : { failed: ended.failure() };
}

async function runFloor() {
  say(`\n[c-floor] raw C (${elapsed()})`);
  try {
    const binary = await buildCFloor(say);
    const { makeJsonInput } = await import("./workloads/json-input.js");
    const jsonInputPath = `${work}/input-1mb.json`;
    writeFileSync(jsonInputPath, makeJsonInput());
    const out = runCFloor(binary, {
      guestDir: `${bench}workloads/guest`,
      jsonInputPath,
      timeMs: quick ? 100 : 1500,
      minIterations: quick ? 2 : 10,
      timeoutMs: (quick ? 60 : 300) * 1000,
    });
    const { checkFor } = await import("./workloads/expected.js");
    const rows = out.rows.map(({ check, ...row }) => {
      try {
        if (row.case === "json") {
          if (check !== "true") throw new Error("round trip changed the document");
        } else if (row.case !== "session") {
          checkFor(row.case)?.(JSON.parse(check));
        }
        return { ...row, status: "ok", opsPerSec: 1e6 / row.medianUs };
      } catch (error) {
        return { case: row.case, status: "failed", reason: `wrong result: ${error.message.split("\n")[0]}` };
      }
    });
    return {
      engine: "c-floor",
      label: "raw C (QuickJS-ng, no Node)",
      info: {
        version: "bench/c-floor/harness.c",
        quickjs: out.quickjs,
        build: C_FLOOR_FLAGS,
        threading: "single thread, no Node",
      },
      rows,
      problems: [],
    };
  } catch (error) {
    return {
      engine: "c-floor",
      label: "raw C (QuickJS-ng, no Node)",
      unavailable: String(error.message ?? error).slice(0, 400),
      rows: [],
      problems: [],
    };
  }
}

async function runOnlyHostile() {
  say(
    "quickjs-native: event loop under hostile outputs (longest gap of a 5 ms timer, median of 3 runs; target ≤ 20 ms)",
  );
  const out = await runChild("quickjs-native", "hostile");
  writeFileSync(`${work}/hostile.json`, JSON.stringify(out, null, 2));
  if (out.crashed || out.unavailable) throw new Error(out.crashed ?? out.unavailable);
  const { hostileSection } = await import("./lib/report.js");
  process.stdout.write(`${hostileSection({ results: [out] })}\n`);
}

async function main() {
  mkdirSync(work, { recursive: true });
  if (only === "hostile") return runOnlyHostile();
  if (only !== undefined) throw new Error(`--only supports: hostile (got ${only})`);
  const machine = describeMachine();
  say(`quickjs-native benchmarks (${quick ? "quick smoke run" : "full run"})`);
  ensureBenchDeps(say);
  const floor = modeArg ? undefined : await runFloor();
  const results = [];
  for (const [i, engine] of engines.entries()) results.push(await runEngine(engine, i));
  if (floor) results.push(floor);
  // The rounds compare this checkout with the baseline: only when both run.
  const pairRuns = baselineArg && engines.includes("quickjs-native") && !quick;
  const baselineRounds =
    pairRuns && (modeRuns("timed") || modeRuns("otel")) ? await runBaselineRounds(results) : undefined;
  const own = (mode) => engines.includes("quickjs-native") && modeRuns(mode);
  const threadStorage = own(THREAD_STORAGE)
    ? await runCheckpointerCase("thread storage", "thread-storage.js", quick ? 1 : 3)
    : undefined;
  const durableEvals = own(DURABLE_EVALS)
    ? await runCheckpointerCase("durable evals", "durable-evals.js", quick ? 1 : 5)
    : undefined;
  const processTier = own(PROCESS_TIER) && process.platform === "linux" ? await runProcessTier() : undefined;
  const run = {
    quick,
    machine: { ...machine, loadAtEnd: currentLoad() },
    durationS: (Date.now() - started) / 1000,
    results,
    threadStorage,
    durableEvals,
    processTier,
    baselineRounds,
  };
  writeFileSync(`${work}/results.json`, JSON.stringify(run, null, 2));
  const { renderReport } = await import("./lib/report.js");
  const { renderChart } = await import("./lib/chart.js");
  // A subset or quick run must not replace the published report: it goes next to the raw results.
  const draft = engineArg || modeArg || quick;
  const outDir = draft ? work : bench.replace(/\/$/, "");
  writeFileSync(`${outDir}/chart.svg`, renderChart(run));
  writeFileSync(`${outDir}/RESULTS.md`, renderReport(run));
  const shown = draft ? "bench/.work/" : "bench/";
  say(`\nwrote ${shown}RESULTS.md and ${shown}chart.svg in ${elapsed()}`);
}

main().catch((error) => {
  // Only the harness itself failing (deps cannot be installed, disk full) ends up here.
  say(`bench failed: ${error?.stack ?? error}`);
  process.exit(1);
});
