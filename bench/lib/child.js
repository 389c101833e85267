// One engine's cases in a process of their own: `node --expose-gc lib/child.js ENGINE MODE OUT
// [--quick]`, MODE = timed | otel | memory:N | eventloop | latency | hostile | scheduler. Writes a JSON result to OUT; progress to stderr.
// `otel` registers the OpenTelemetry SDK (lib/otel-sdk.js) before the engine loads, then runs the
// timed cases OTEL_CASE_IDS as `<id>-otel`.
import { writeFileSync } from "node:fs";
import { loadAdapter } from "../engines/index.js";
import { OTEL_CASE_IDS, runTimedCases } from "./timed-cases.js";
import { runMemoryCase } from "./memory-case.js";
import { runEventLoopCase } from "./event-loop-case.js";
import { runLatencyCases } from "./latency-case.js";
import { runHostileCase } from "./hostile-case.js";
import { formatSchedulerRow, runSchedulerCase } from "./scheduler-case.js";
import { formatRow } from "./format.js";

const [engineId, mode, outPath, ...flags] = process.argv.slice(2);
const quick = flags.includes("--quick");
const say = (text) => process.stderr.write(`  ${engineId.padEnd(18)} ${text}\n`);
// The scheduler case measures evals past the executor's cap: a small cap keeps that cheap. The cap
// is read at the first async eval, so it is set before anything loads.
if (mode === "scheduler") process.env.QJSN_EXECUTOR_THREADS ??= "4";

async function main() {
  if (mode === "otel") (await import("./otel-sdk.js")).registerOtelSdk();
  const adapter = await loadAdapter(engineId);
  const loadStarted = performance.now();
  let info;
  try {
    info = await adapter.load();
  } catch (error) {
    const unavailable = String(error?.message ?? error);
    say(`unavailable: ${unavailable}`);
    return { engine: engineId, label: adapter.label, unavailable };
  }
  const loadMs = performance.now() - loadStarted;
  const out = { engine: engineId, label: adapter.label, info, rows: [] };
  if (mode === "timed") {
    out.rows.push({ case: "load", status: "ok", onceMs: loadMs });
    say(formatRow(out.rows[0]));
    out.rows.push(...(await runTimedCases(adapter, { quick, onProgress: (row) => say(formatRow(row)) })));
  } else if (mode === "otel") {
    out.rows.push(
      ...(await runTimedCases(adapter, {
        quick,
        ids: OTEL_CASE_IDS,
        suffix: "-otel",
        onProgress: (row) => say(formatRow(row)),
      })),
    );
  } else if (mode.startsWith("memory:")) {
    const count = Number(mode.slice("memory:".length));
    const row = {
      case: count >= 10000 ? "rss-10k" : "rss-100",
      ...(await runMemoryCase(adapter, count, { onProgress: say })),
    };
    say(formatRow(row));
    out.rows.push(row);
  } else if (mode === "eventloop") {
    const row = { case: "event-loop", ...(await runEventLoopCase(adapter, quick ? 250 : 2000)) };
    say(formatRow(row));
    out.rows.push(row);
  } else if (mode === "latency") {
    out.rows.push(
      ...(await runLatencyCases(adapter, {
        spinMs: quick ? 250 : 2000,
        hostMs: quick ? 250 : 2000,
        onProgress: (row) => say(formatRow(row)),
      })),
    );
  } else if (mode === "hostile") {
    out.rows.push(
      ...(await runHostileCase({
        quick,
        onProgress: (row) =>
          say(`${row.title}: longest gap ${row.medianGapMs.toFixed(1)} ms (worst ${row.maxGapMs.toFixed(1)} ms)`),
      })),
    );
  } else if (mode === "scheduler") {
    out.rows.push(...(await runSchedulerCase({ quick, onProgress: (row) => say(formatSchedulerRow(row)) })));
  } else {
    throw new Error(`unknown mode ${mode}`);
  }
  return out;
}

main().then(
  (out) => {
    writeFileSync(outPath, JSON.stringify(out));
    // Engines may keep handles (thread pools, WASM workers) alive: the result is written, leave.
    process.exit(0);
  },
  (error) => {
    writeFileSync(outPath, JSON.stringify({ engine: engineId, crashed: String(error?.stack ?? error) }));
    process.exit(1);
  },
);
