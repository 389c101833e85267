// The catalog of benchmark cases: what each measures and what one operation includes. The
// runner (lib/run-cases.js), the C floor and the report all key off these ids.

/**
 * @typedef {object} CaseInfo
 * @property {string} id        stable key used in results
 * @property {string} letter    the case letter
 * @property {string} title     short row title
 * @property {"time"|"once"|"memory"|"eventloop"|"latency"} kind
 * @property {string} includes  what one measured operation contains (fairness note)
 * @property {boolean} [fullOnly] skipped by --quick
 * @property {boolean} [cFloor] the raw-C harness runs it too
 * @property {boolean} [ownOnly] measured for quickjs-native (and the --baseline checkout) only
 */

/** @type {CaseInfo[]} */
export const CASES = [
  {
    id: "load",
    letter: "a",
    title: "module / addon load (one-time)",
    kind: "once",
    includes:
      "First import of the engine package in a fresh process plus any WASM compilation or module instantiation; one sample per process.",
  },
  {
    id: "session",
    letter: "a",
    title: "create + dispose session",
    kind: "time",
    cFloor: true,
    includes:
      "One runtime + context with a 64 MiB memory limit where the engine has one, then disposal. For @langchain/quickjs: `new ReplSession` + its lazy start (console + tools setup) + dispose.",
  },
  {
    id: "eval-sync",
    letter: "b",
    title: "eval `1+1` warm, sync",
    kind: "time",
    cFloor: true,
    includes: "Compile + run `1+1` on a live session and copy the number back to the host.",
  },
  {
    id: "eval-async",
    letter: "b",
    title: "eval `1+1` warm, async",
    kind: "time",
    includes:
      "The engine's promise-returning eval (off-thread where the engine has threads) of `1+1`, awaited by the host.",
  },
  {
    id: "transform",
    letter: "c",
    title: "10k-object transform",
    kind: "time",
    cFloor: true,
    includes:
      "Guest builds 10,000 `{team, score}` objects and reduces them to per-team totals; the totals object is copied back. Sync eval where the engine has one.",
  },
  {
    id: "sync-host",
    letter: "d",
    title: "10k sync host calls",
    kind: "time",
    cFloor: true,
    includes: "One eval whose loop calls a synchronous host function 10,000 times (`s += host(i)`, host returns i+1).",
  },
  {
    id: "async-host",
    letter: "e",
    title: "10k awaited async host calls",
    kind: "time",
    cFloor: true,
    includes:
      "One async eval whose loop does `s += await host(i)` 10,000 times against a host function returning a promise; each await is a full guest→host→guest round trip.",
  },
  {
    id: "json",
    letter: "f",
    title: "1 MB JSON round trip",
    kind: "time",
    cFloor: true,
    includes:
      "A 1 MiB JSON string set as a guest global, `JSON.stringify(JSON.parse(input))` in the guest, the 1 MiB string copied back.",
  },
  {
    id: "rss-100",
    letter: "g",
    title: "RSS per live session (100 sessions)",
    kind: "memory",
    sessions: 100,
    includes:
      "Process RSS growth after creating 100 sessions that each evaluated `1+1`, divided by 100 (own process, after GC). WASM engines grow one linear memory in large steps, so their 100-session figure is coarse: read the 10,000-session row for them.",
  },
  {
    id: "rss-10k",
    letter: "g",
    title: "RSS per live session (10,000 sessions)",
    kind: "memory",
    sessions: 10000,
    fullOnly: true,
    includes:
      "As above with 10,000 live sessions (stopped early, and reported as such, if RSS passes 4 GiB or the engine's heap is full).",
  },
  {
    id: "event-loop",
    letter: "h",
    title: "event-loop p99 delay while 2 guests spin",
    kind: "eventloop",
    includes:
      "`monitorEventLoopDelay` (1 ms resolution) p99 while two sessions each run `while (true) {}` under a 2 s timeout (0.25 s in --quick), started together. Engines that run guests on the main thread run them one after the other.",
  },
  {
    id: "latency-spin",
    letter: "k",
    title: "trivial eval latency while 8 sessions spin",
    kind: "latency",
    includes:
      'p50/p99 of `await evalAsync("1+1")` in one session, sampled 1 ms apart, while 8 other sessions each run `while (true) {}` under a 2 s execution budget (0.25 s in --quick), started together, until the last spinner stops. Engines that run guests on the Node main thread skip it.',
  },
  {
    id: "latency-host",
    letter: "k",
    title: "trivial eval latency while 4 sessions loop over awaited host calls",
    kind: "latency",
    includes:
      "As above while 4 other sessions repeat the 10,000-awaited-host-call eval of case (e), for 2 s (0.25 s in --quick).",
  },
  {
    id: "eval-tool",
    letter: "i",
    title: "eval tool call end to end (middleware)",
    kind: "time",
    includes:
      "`evalTool.invoke({ code }, { configurable: { thread_id } })` on a warm thread: code transform, session lookup, one awaited call of the fake `lookup` tool, result formatting.",
  },
  {
    id: "eval-sync-otel",
    letter: "b",
    title: "eval `1+1` warm, sync, with OpenTelemetry SDK",
    kind: "time",
    ownOnly: true,
    includes:
      "Case (b) sync with the OpenTelemetry SDK registered as the README sets it up (bench/lib/otel-sdk.js: BatchSpanProcessor over an in-memory exporter, AsyncLocalStorage context manager, meter provider with an in-memory reader): the eval's span and its duration record.",
  },
  {
    id: "sync-host-otel",
    letter: "d",
    title: "10k sync host calls, with OpenTelemetry SDK",
    kind: "time",
    ownOnly: true,
    includes:
      "Case (d) with the OpenTelemetry SDK registered as above: a span and a duration record per host call, and the eval's.",
  },
  {
    id: "eval-tool-otel",
    letter: "i",
    title: "eval tool call end to end, with OpenTelemetry SDK",
    kind: "time",
    ownOnly: true,
    includes:
      "Case (i) with the OpenTelemetry SDK registered as above: the eval tool call's span, the eval's, the `lookup` call's, and their records.",
  },
  {
    id: "snapshot-10k",
    letter: "j",
    title: "snapshot + restore, 10 KB state",
    kind: "time",
    includes:
      "`sb.snapshot()` of a session holding ~10 KB of guest state, then `Sandbox.restore(bytes)` and dispose of the restored session.",
  },
  {
    id: "snapshot-1m",
    letter: "j",
    title: "snapshot + restore, 1 MB state",
    kind: "time",
    includes: "As above with ~1 MB of guest state.",
  },
];

/** The case with this id (throws on an unknown id: a typo must not silently skip a case). */
export function caseById(id) {
  const found = CASES.find((c) => c.id === id);
  if (!found) throw new Error(`unknown case ${id}`);
  return found;
}
