// Renders bench/RESULTS.md from one run's results (every ratio comes from the same run).
import { BASELINE_ID } from "../engines/index.js";
import { CASES, caseById } from "../workloads/cases.js";
import { evaluateGoals } from "./goals.js";
import { formatOps, formatRatio, formatUs } from "./format.js";

const NATIVE = "quickjs-native";
const BASELINE = BASELINE_ID;
const FLOOR = "c-floor";
const esc = (s) =>
  String(s ?? "")
    .replace(/\|/g, "\\|")
    .replace(/\n/g, " ");

/** Markdown table; `align` has one letter per column, l or r (numbers read best right-aligned). */
function table(headers, rows, align = "l".repeat(headers.length)) {
  return [
    `| ${headers.join(" | ")} |`,
    `|${headers.map((_h, i) => (align[i] === "r" ? "---:" : "---")).join("|")}|`,
    ...rows.map((r) => `| ${r.map(esc).join(" | ")} |`),
  ].join("\n");
}

function findRow(result, caseId) {
  return result?.rows.find((r) => r.case === caseId);
}

/** Why an engine has no number for a case. */
function reasonFor(result, caseId, run) {
  if (result.unavailable) return `engine unavailable: ${result.unavailable}`;
  const r = findRow(result, caseId);
  if (r) return `${r.status}: ${r.reason}`;
  if (result.problems.length) return `not measured: ${result.problems.join("; ")}`;
  return run.quick ? "not measured in --quick" : "not measured";
}

function timedSection(run, info) {
  const native = findRow(
    run.results.find((r) => r.engine === NATIVE),
    info.id,
  );
  const floor = findRow(
    run.results.find((r) => r.engine === FLOOR),
    info.id,
  );
  const base = (r) => (r?.status === "ok" ? r.medianUs : NaN);
  const rows = [];
  for (const result of run.results) {
    if (result.engine === FLOOR && !info.cFloor) continue;
    if (info.ownOnly && !result.engine.startsWith(NATIVE)) continue;
    const r = findRow(result, info.id);
    const label = result.label ?? result.engine;
    if (r?.status === "ok") {
      rows.push([
        label,
        formatUs(r.medianUs),
        formatUs(r.p99Us),
        formatOps(r.opsPerSec),
        formatRatio(r.medianUs / base(native)),
        formatRatio(r.medianUs / base(floor)),
        r.samples,
        r.note ?? "",
      ]);
    } else {
      rows.push([label, "—", "—", "—", "—", "—", "—", reasonFor(result, info.id, run)]);
    }
  }
  return table(
    ["engine", "median", "p99", "ops/s", "vs quickjs-native", "vs raw C", "samples", "note"],
    rows,
    "lrrrrrrl",
  );
}

function onceSection(run) {
  const rows = run.results
    .filter((r) => r.engine !== FLOOR)
    .map((result) => {
      const r = findRow(result, "load");
      return r?.status === "ok"
        ? [result.label, `${r.onceMs.toFixed(1)} ms`, ""]
        : [result.label, "—", reasonFor(result, "load", run)];
    });
  return table(["engine", "first load", "note"], rows, "lrl");
}

function memorySection(run, info) {
  const native = findRow(
    run.results.find((r) => r.engine === NATIVE),
    info.id,
  );
  const rows = run.results
    .filter((r) => r.engine !== FLOOR)
    .map((result) => {
      const r = findRow(result, info.id);
      return r?.status === "ok"
        ? [
            result.label,
            `${r.perSessionKB.toFixed(0)} KB`,
            r.sessions.toLocaleString("en-US"),
            formatRatio(r.perSessionKB / native?.perSessionKB),
            r.note ?? "",
          ]
        : [result.label, "—", "—", "—", reasonFor(result, info.id, run)];
    });
  return table(["engine", "RSS per session", "live sessions", "vs quickjs-native", "note"], rows, "lrrrl");
}

function eventLoopSection(run) {
  const rows = run.results
    .filter((r) => r.engine !== FLOOR)
    .map((result) => {
      const r = findRow(result, "event-loop");
      return r?.status === "ok"
        ? [
            result.label,
            `${r.p99Ms.toFixed(2)} ms`,
            `${r.maxMs.toFixed(1)} ms`,
            `${r.wallMs.toFixed(0)} ms`,
            `2 × ${r.spinMs} ms`,
          ]
        : [result.label, "—", "—", "—", reasonFor(result, "event-loop", run)];
    });
  return table(["engine", "p99 delay", "max delay", "wall time", "guest spin"], rows, "lrrrl");
}

function latencySection(run, info) {
  const rows = run.results
    .filter((r) => r.engine !== FLOOR)
    .map((result) => {
      const r = findRow(result, info.id);
      return r?.status === "ok"
        ? [
            result.label,
            `${r.p50Ms.toFixed(2)} ms`,
            `${r.p99Ms.toFixed(1)} ms`,
            `${r.maxMs.toFixed(1)} ms`,
            r.samples,
            `${r.wallMs.toFixed(0)} ms`,
          ]
        : [result.label, "—", "—", "—", "—", reasonFor(result, info.id, run)];
    });
  return table(["engine", "p50", "p99", "max", "samples", "wall time / note"], rows, "lrrrrl");
}

/** Case "event loop under hostile outputs" of quickjs-native, one row per hostile class. */
export function hostileSection(run) {
  const rows = (run.results.find((r) => r.engine === "quickjs-native")?.rows ?? [])
    .filter((row) => row.case.startsWith("hostile:"))
    .map((row) => [
      row.title,
      `${row.medianGapMs.toFixed(1)} ms`,
      `${row.maxGapMs.toFixed(1)} ms`,
      row.medianGapMs <= 20 ? "met" : "missed",
      row.outcome.replace(/\|/g, "\\|"),
    ]);
  if (rows.length === 0) return "Not measured in this run.";
  return table(
    ["hostile class, at its cap", "longest gap (median of 3; 1 in a quick run)", "worst", "≤ 20 ms", "outcome"],
    rows,
    "lrrll",
  );
}

/** Case "scheduler" of quickjs-native (bench/lib/scheduler-case.js): one table per row. */
export function schedulerSection(run) {
  const rows = run.results.find((r) => r.engine === NATIVE)?.rows ?? [];
  const spread = rows.find((r) => r.case === "batch-spread");
  const pastCap = rows.find((r) => r.case === "past-cap");
  const busy = rows.find((r) => r.case === "busy-host");
  if (!spread && !pastCap && !busy) return "Not measured in this run.";
  const out = [];
  const us = (x) => `${x.toFixed(1)} µs`;
  if (spread) {
    const line = (title, x) => [title, us(x.minUs), us(x.medianUs), us(x.maxUs), x.maxUs <= 15 ? "met" : "missed"];
    out.push(
      `\`await eval("1+1")\` in ${spread.fresh.batches} consecutive batches of 200 per phase, one fresh process: the spread of the batch medians.`,
      "",
      table(
        ["phase", "lowest batch median", "median", "highest", "every batch ≤ 15 µs"],
        [line("fresh process", spread.fresh), line("after 8 spinners ended", spread.afterSpinners)],
        "lrrrl",
      ),
      "",
    );
  }
  if (pastCap) {
    out.push(
      `A trivial eval's wait while ${pastCap.spinners} sessions spin with the executor's cap at ${pastCap.cap} (more spinners than threads may run guest code), ${pastCap.samples} evals 1 ms apart.`,
      "",
      table(
        ["p50", "p99", "max", "no wait over 50 ms"],
        [
          [
            `${pastCap.p50Ms.toFixed(2)} ms`,
            `${pastCap.p99Ms.toFixed(1)} ms`,
            `${pastCap.maxMs.toFixed(1)} ms`,
            pastCap.maxMs <= 50 ? "met" : "missed",
          ],
        ],
        "rrrl",
      ),
      "",
    );
  }
  if (busy) {
    out.push(
      `Busy host: an eval of a CPU-bound loop, wall time off-thread (\`eval\`) and on the main thread (\`evalSync\`) while two busy-loop processes of ordinary priority run (median of ${busy.rounds} alternating rounds), and before they start.`,
      "",
      table(
        ["", "off-thread", "main thread", "off-thread / main", "≤ 1.5×"],
        [
          [
            "2 busy loops",
            `${busy.offThreadMs.toFixed(0)} ms`,
            `${busy.syncMs.toFixed(0)} ms`,
            formatRatio(busy.ratio),
            busy.ratio <= 1.5 ? "met" : "missed",
          ],
          [
            "before the busy loops",
            `${busy.quietOffThreadMs.toFixed(0)} ms`,
            `${busy.quietSyncMs.toFixed(0)} ms`,
            formatRatio(busy.quietOffThreadMs / busy.quietSyncMs),
            "",
          ],
        ],
        "lrrrl",
      ),
    );
  }
  return out.join("\n").trim();
}

/** A separately run case's section (checkpointer cases, the process tier): `intro`, then its Markdown (or why it is missing). */
function checkpointerCaseSection(intro, measured) {
  if (measured === undefined) return `${intro}\n\nNot measured in this run.`;
  if (measured.failed) return `${intro}\n\nNot measured: ${measured.failed}`;
  return `${intro}\n\n${measured.markdown}`;
}

/** Case "process tier" (bench/process-tier.js): `isolation: "process"` beside the in-process tier. */
export function processTierSection(run) {
  const intro =
    'A sandbox with `isolation: "process"` (its runtime in a confined helper process) beside one in this process, measured alternately in one process, each figure a median, against the targets of issue 30 (`bench/process-tier.js`; alone: `node --expose-gc bench/process-tier.js`).';
  return checkpointerCaseSection(intro, run.processTier);
}

/**
 * Case "thread storage" (bench/thread-storage.js): bytes a thread's interpreter state adds to the
 * checkpointer and store per turn, and the restore in a fresh process.
 */
export function threadStorageSection(run) {
  return checkpointerCaseSection(
    'Mode `"thread"` with a signed snapshot, SQLite checkpointer plus `SqliteStore` (and PostgreSQL when `QJSN_POSTGRES_URL` is set): seven agent runs of one eval each on a 10,000-row state, the bytes each adds, then the restore of that state and of a small one in fresh processes (`bench/thread-storage.js`; alone, with more processes and layouts: `node bench/thread-storage.js --runs=5`).',
    run.threadStorage,
  );
}

/**
 * Case "durable evals" (bench/durable-evals.js): what journaling each host call as it completes
 * costs an eval, a resume after a crash, and the checkpointer.
 */
export function durableEvalsSection(run) {
  return checkpointerCaseSection(
    "`durableEvals` (on by default with a checkpointer) on SQLite (and PostgreSQL when `QJSN_POSTGRES_URL` is set): an eval of 100 sequential calls to a 1 ms tool with and without the journal, the resume of an eval stopped after call 900 of 1,000 until call 901 starts, and the bytes journaled per call returning 200 characters (`bench/durable-evals.js`; alone: `node bench/durable-evals.js --runs=5`).",
    run.durableEvals,
  );
}

/** One cell of the summary: the case's headline number in its own unit. */
function glanceCell(info, result) {
  if (result.engine === FLOOR && !info.cFloor) return "";
  if (info.ownOnly && !result.engine.startsWith(NATIVE)) return "";
  const value = headline(info, findRow(result, info.id));
  if (Number.isNaN(value)) return "—";
  if (info.kind === "once") return `${value.toFixed(1)} ms`;
  if (info.kind === "memory") return `${value.toFixed(0)} KB`;
  if (info.kind === "eventloop" || info.kind === "latency") return `${value.toFixed(1)} ms`;
  return formatUs(value);
}

/** The case's headline number in its own unit (the one glanceCell shows), or NaN when not measured. */
function headline(info, r) {
  if (r?.status !== "ok") return Number.NaN;
  if (info.kind === "once") return r.onceMs;
  if (info.kind === "memory") return r.perSessionKB;
  if (info.kind === "eventloop" || info.kind === "latency") return r.p99Ms;
  return r.medianUs;
}

/** The median of finite `values`, or NaN when there are none. */
function median(values) {
  const sorted = values.filter(Number.isFinite).sort((a, b) => a - b);
  if (sorted.length === 0) return Number.NaN;
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
}

/**
 * This checkout against the `--baseline` checkout, case by case, both measured in this run. A case
 * measured in every round of `run.baselineRounds` is read by its median ratio over the rounds.
 */
function baselineSection(run, baseline) {
  const native = run.results.find((r) => r.engine === NATIVE);
  const shown = CASES.filter((c) => !(c.fullOnly && run.quick));
  const rounds = run.baselineRounds ?? [];
  const rows = shown.map((c) => {
    const perRound = rounds.map(
      (r) =>
        headline(
          c,
          r.native.find((row) => row.case === c.id),
        ) /
        headline(
          c,
          r.baseline.find((row) => row.case === c.id),
        ),
    );
    const inRounds = perRound.length > 1 && perRound.every(Number.isFinite);
    const ratio = inRounds
      ? median(perRound)
      : headline(c, findRow(native, c.id)) / headline(c, findRow(baseline, c.id));
    const verdict = !Number.isFinite(ratio)
      ? ""
      : ratio > 1.05
        ? "slower by more than 5%"
        : ratio < 0.95
          ? "faster by more than 5%"
          : "within 5%";
    const roundCell = inRounds ? perRound.map(formatRatio).join(", ") : "one process each";
    return [
      `(${c.letter}) ${c.title}`,
      glanceCell(c, native),
      glanceCell(c, baseline),
      formatRatio(ratio),
      roundCell,
      verdict,
    ];
  });
  return table(
    [
      "case (median; RSS per session; p99 delay)",
      "this checkout",
      baseline.label ?? BASELINE,
      "this / baseline",
      "per round",
      "",
    ],
    rows,
    "lrrrll",
  );
}

/**
 * What registering the OpenTelemetry SDK costs this checkout, case by case: each `<id>-otel` row
 * against `<id>` (same engine, same run), by the median of the rounds' ratios when there were rounds.
 */
function otelSection(run) {
  const native = run.results.find((r) => r.engine === NATIVE);
  const rows = CASES.filter((c) => c.id.endsWith("-otel") && findRow(native, c.id)).map((c) => {
    const plain = caseById(c.id.slice(0, -"-otel".length));
    const ratioIn = (rows) =>
      headline(
        c,
        rows?.find((row) => row.case === c.id),
      ) /
      headline(
        plain,
        rows?.find((row) => row.case === plain.id),
      );
    const perRound = (run.baselineRounds ?? []).map((r) => ratioIn(r.native));
    const inRounds = perRound.length > 1 && perRound.every(Number.isFinite);
    const ratio = inRounds ? median(perRound) : ratioIn(native.rows);
    return [
      `(${plain.letter}) ${plain.title}`,
      glanceCell(plain, native),
      glanceCell(c, native),
      formatRatio(ratio),
      inRounds ? perRound.map(formatRatio).join(", ") : "one process each",
    ];
  });
  return rows.length === 0
    ? undefined
    : table(["case (median)", "no SDK", "OpenTelemetry SDK", "SDK / no SDK", "per round"], rows, "lrrrl");
}

function atAGlance(run) {
  const shown = CASES.filter((c) => !(c.fullOnly && run.quick));
  const rows = shown.map((c) => [`(${c.letter}) ${c.title}`, ...run.results.map((result) => glanceCell(c, result))]);
  return table(
    ["case (median; RSS per session; p99 delay)", ...run.results.map((r) => r.label ?? r.engine)],
    rows,
    `l${"r".repeat(run.results.length)}`,
  );
}

const FAIRNESS = [
  "Every engine runs the byte-identical guest sources in `bench/workloads/guest/`; each case checks the guest's answer against the value Node computes from the same source, so an engine that skips work fails the case instead of looking fast.",
  "Each engine's cases run in child processes of their own (timed cases, each memory count, the event-loop case and the latency cases are separate processes), one engine at a time, never in parallel.",
  "Timing: tinybench, per-operation samples with warm-up; median and p99 of those samples; ops/s = 1 / median. The C floor uses the same estimator (linear-interpolated quantiles) over `clock_gettime` samples.",
  "Session settings: 64 MiB memory limit where the engine has one, default stack size, no console capture except where the engine always installs it (@langchain/quickjs).",
  "Host-function marshalling is each engine's own: quickjs-native `defineFunction` / `defineAsyncFunction`; quickjs-emscripten `newFunction` (+ `newPromise` settled through `executePendingJobs` for async; asyncified functions cannot serve an `await` loop because continuations run inside the synchronous job queue); isolated-vm `ivm.Callback` (sync) and an `ivm.Reference` applied with `result.promise` behind a one-line guest shim (async); @langchain/quickjs PTC tools (`tools.host({ args })`, text results) behind a one-line guest shim.",
  "@langchain/quickjs has no way to hand data to a session except code or tools; case (f) sets the input string through the QuickJS context its ReplSession owns, then evaluates through `ReplSession.eval` (with its transform).",
  "Case (a) excludes the one-time load, which is reported separately; for @langchain/quickjs it includes its lazy start (console and tools setup), which its `eval` would otherwise pay on first use.",
  "Case (i) uses the same fake `lookup` tool (no I/O) in both middlewares and resolves PTC tools once through `wrapModelCall`, as an agent's first model call would.",
  "@langchain/quickjs starts each eval's timeout when `eval()` is called and runs evals one at a time per process, so in case (h) the second guest's budget runs out while it waits: its wall time shows one spin, not two.",
  "quickjs-native's `eval` copies out the completion value and does not settle a returned promise (the other engines do), so for case (e) its adapter evaluates `await (<source>)`, which runs the same guest source as an async script.",
  "The C floor creates contexts with `JS_NewContext` (all intrinsics); an engine that leaves intrinsics out can create sessions faster than the floor.",
  "The machine is shared (2 cores); runs of the same suite have varied by up to 1.6×, so compare within one run: every ratio here is computed from this run's medians.",
];

/** Markdown for bench/RESULTS.md. */
export function renderReport(run) {
  const m = run.machine;
  const out = [];
  out.push("# Benchmark results", "");
  out.push(
    `Generated by \`npm run ${run.quick ? "bench:quick" : "bench"}\` on ${m.date} in ${run.durationS.toFixed(0)} s. All numbers and ratios below come from this one run${run.quick ? " (quick smoke run: short time budgets, fewer samples, no 10,000-session memory case; use `npm run bench` for numbers worth quoting)" : ""}.`,
    "",
  );
  out.push("## Machine", "");
  out.push(
    table(
      ["", ""],
      [
        ["CPU", m.cpu],
        ["memory", m.memory],
        ["OS", m.os],
        ["Node", `${m.node} (V8 ${m.v8})`],
        ["load average (1 min) at start / end", `${m.loadAtStart.toFixed(2)} / ${m.loadAtEnd.toFixed(2)}`],
      ],
    ),
    "",
  );
  const cores = Number(/× (\d+)$/.exec(m.cpu)?.[1] ?? 1);
  if (Math.max(m.loadAtStart, m.loadAtEnd) > cores) {
    out.push(
      `> The machine was busy with other work during this run (load above its ${cores} cores): absolute numbers are inflated and noisier than usual; ratios within the run are the figures to read.`,
      "",
    );
  }

  out.push("## Engines", "");
  out.push(
    table(
      ["engine", "package versions", "JS engine", "build", "threading", "status"],
      run.results.map((r) => [
        r.label ?? r.engine,
        r.info?.version ?? "—",
        r.info?.quickjs ?? "—",
        r.info?.build ?? "—",
        r.info?.threading ?? "—",
        r.unavailable
          ? `unavailable: ${r.unavailable}`
          : r.problems.length
            ? `partial: ${r.problems.join("; ")}`
            : "ran",
      ]),
    ),
    "",
  );

  out.push("## Goals (quickjs-native)", "");
  out.push(
    table(
      ["goal", "target", "measured", "status"],
      evaluateGoals(run).map((g) => [
        g.goal,
        g.target,
        g.measured,
        g.status === "not measured" ? `not measured: ${g.detail}` : g.status,
      ]),
      "lrrl",
    ),
    "",
  );

  // The table compares this checkout with the baseline: a run of the baseline alone has none.
  const baseline = run.results.find((r) => r.engine === BASELINE);
  if (baseline && run.results.some((r) => r.engine === NATIVE)) {
    out.push("## Against the baseline", "");
    out.push(
      "`--baseline` ran the quickjs-native build of another checkout right after this one, with the same cases: a ratio above 1× means this checkout is slower. The two columns of numbers are the first round's. The timed cases then ran in further pairs of processes, in alternating order (AB, BA, AB), because one process's median moves between processes by more than 5% for some cases (up to 15% for the eval tool): their ratio is the median of the rounds' ratios, each round's shown beside it. The module load (a) is a single sample per process; the other cases (memory, event loop, latency) ran once.",
      "",
      baselineSection(run, baseline),
      "",
    );
  }

  const otel = otelSection(run);
  if (otel !== undefined) {
    out.push("## OpenTelemetry cost (quickjs-native)", "");
    out.push(
      "The cases of issue 32 item 5 with and without the OpenTelemetry SDK registered (child mode `otel`, `bench/lib/otel-sdk.js`: BatchSpanProcessor over an in-memory exporter, AsyncLocalStorage context manager, meter provider with an in-memory reader), this checkout, each in a process of its own. With `--baseline`, the ratio is the median of the rounds' ratios.",
      "",
      otel,
      "",
    );
  }
  out.push(
    "## Chart",
    "",
    "Median time per operation, log scale (shorter is faster).",
    "",
    "![Median time per operation by case and engine, log scale](chart.svg)",
    "",
  );
  out.push("## At a glance", "", atAGlance(run), "");

  out.push("## Results by case", "");
  out.push("Ratios are this engine's median divided by quickjs-native's and by raw C's (below 1× is faster).", "");
  for (const info of CASES) {
    if (info.fullOnly && run.quick) continue;
    out.push(`### (${info.letter}) ${info.title}`, "", `One operation: ${info.includes}`, "");
    if (info.kind === "time") out.push(timedSection(run, info));
    else if (info.kind === "once") out.push(onceSection(run));
    else if (info.kind === "memory") out.push(memorySection(run, info));
    else if (info.kind === "latency") out.push(latencySection(run, info));
    else out.push(eventLoopSection(run));
    out.push("");
  }

  out.push("## Event loop under hostile outputs (quickjs-native)", "");
  out.push(
    "The longest gap of a 5 ms timer on the Node main thread while each hostile class runs at its cap through the middleware's eval tool or the Sandbox API (`bench/lib/hostile-case.js`; alone: `node bench/run.js --only=hostile`).",
    "",
  );
  out.push(hostileSection(run), "");

  out.push("## Scheduler (quickjs-native)", "");
  out.push(
    "What the executor's scheduling costs a session: hand-overs batch by batch, evals past the thread cap, and a host busy with other processes (`bench/lib/scheduler-case.js`, a process of its own with `QJSN_EXECUTOR_THREADS=4`; alone: `node bench/run.js --engines=quickjs-native --modes=scheduler`).",
    "",
  );
  out.push(schedulerSection(run), "");

  out.push("## Thread storage (quickjs-native)", "");
  out.push(threadStorageSection(run), "");

  out.push("## Durable evals (quickjs-native)", "");
  out.push(durableEvalsSection(run), "");

  out.push("## Process tier (quickjs-native)", "");
  out.push(processTierSection(run), "");

  out.push("## Fairness notes", "");
  for (const note of FAIRNESS) out.push(`- ${note}`);
  out.push("- Builds:");
  for (const r of run.results) if (r.info) out.push(`  - ${r.label}: ${r.info.quickjs}; ${r.info.build}.`);
  out.push("");
  out.push(
    "Reproduce: `npm ci && npm run bench` (full, a few minutes) or `npm run bench:quick` (smoke run). `node bench/run.js --engines=quickjs-native,isolated-vm` runs a subset.",
    "",
  );
  return out.join("\n");
}
