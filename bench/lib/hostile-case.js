// Case "event loop under hostile outputs" (quickjs-native only): the longest gap of a 5 ms
// setInterval on the Node main thread while one hostile class runs at its cap, through the
// middleware's eval tool or the Sandbox API. Every class is what a model-written script can do to
// the one event loop that serves every other session. Target: ≤ 20 ms per class.
import { fileURLToPath, pathToFileURL } from "node:url";
import { approvalStallCases } from "./approval-stall.js";
import { codeArgumentClasses, fill } from "./hostile-code-argument.js";

const root = fileURLToPath(new URL("../../", import.meta.url));
const TICK_MS = 5;

/** Longest delay (ms) of a 5 ms interval timer beyond its period while `work()` runs. */
async function longestGap(work) {
  let last = performance.now();
  let longest = 0;
  const timer = setInterval(() => {
    const now = performance.now();
    longest = Math.max(longest, now - last - TICK_MS);
    last = now;
  }, TICK_MS);
  await new Promise((resolve) => setTimeout(resolve, 4 * TICK_MS));
  last = performance.now();
  longest = 0;
  const started = performance.now();
  let outcome;
  try {
    outcome = await work();
  } catch (error) {
    outcome = `threw ${error?.code ?? error?.name}: ${String(error?.message).slice(0, 120)}`;
  }
  const wallMs = performance.now() - started;
  // A loop blocked until now records the gap only when the timer fires next.
  await new Promise((resolve) => setTimeout(resolve, 4 * TICK_MS));
  clearInterval(timer);
  return {
    gapMs: Math.max(0, longest),
    wallMs,
    outcome: typeof outcome === "string" ? outcome : String(outcome?.content ?? outcome),
  };
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/**
 * The hostile classes, as `[title, prepare]` pairs and `dispose`: each prepares its input outside
 * the measured window, then runs it once (scripts/profile-hostile-stall.mjs runs one of them).
 */
export function classes(api, lc) {
  const middleware = lc.createCodeInterpreterMiddleware({ executionTimeoutMs: 2000 });
  const evalTool = middleware.tools[0];
  let thread = 0;
  const viaEval = (code) => {
    const config = { configurable: { thread_id: `hostile-${thread++}` } };
    return () => evalTool.invoke({ code }, config);
  };
  const KiB = 1024;
  return {
    dispose: () => middleware.dispose(),
    cases: [
      // The floor of this machine at this moment: a busy machine delays the timer by itself.
      ["control: eval of 1 + 1", () => viaEval("1 + 1")],
      ["escape-heavy text: '<' + 60,000 spaces, ×100", () => viaEval(`("<" + " ".repeat(60000)).repeat(100)`)],
      ["BigInt results: [b, b, b], b = 2n ** 1000000n", () => viaEval("const b = 2n ** 1000000n; [b, b, b]")],
      [
        "BigInt in state: snapshot of 2n ** 1000000n",
        () => {
          const sb = new api.Sandbox();
          sb.evalSync("globalThis.big = 2n ** 1000000n; 0");
          return () => {
            try {
              return `${sb.snapshot().length} bytes`;
            } finally {
              sb.dispose();
            }
          };
        },
      ],
      ["300,000-key result", () => viaEval("const o = {}; for (let i = 0; i < 300000; i++) o['k' + i] = i; o")],
      [
        "shared arrays rendering as 200^7 items",
        () => viaEval("let x = [1]; for (let d = 0; d < 7; d++) x = Array(200).fill(x); x"),
      ],
      [
        "console.log of shared arrays",
        () => viaEval("let x = [1]; for (let d = 0; d < 7; d++) x = Array(200).fill(x); console.log(x); 0"),
      ],
      ["1 MB of code (refused)", () => viaEval(fill((i) => `const v${i}: number = ${i};`, 1024 * KiB))],
      ["JavaScript at the 256 KiB cap", () => viaEval(fill((i) => `var j${i} = ${i} + 1;`, 256 * KiB))],
      ["TypeScript at the 256 KiB cap", () => viaEval(fill((i) => `const t${i}: number = ${i};`, 256 * KiB))],
      [
        "restore with a spinning static block",
        () => {
          const sb = new api.Sandbox();
          // Harmless where it is defined; a restore re-creates the class before the data it checks.
          sb.evalSync(
            "var notYet = 1; class Planted { static { if (globalThis.notYet === undefined) for (;;) {} } } 0",
          );
          const bytes = sb.snapshot();
          sb.dispose();
          // restoreAsync, as the middleware restores: the re-created class runs on an executor thread.
          return async () => {
            try {
              (await api.Sandbox.restoreAsync(bytes, { restoreTimeoutMs: 2000 })).sandbox.dispose();
              return "restored";
            } catch (error) {
              return `refused: ${error.code}`;
            }
          };
        },
      ],
      [
        "dispose of a session holding 1,000,000 objects",
        () => {
          const sb = new api.Sandbox({ memoryLimitBytes: 512 * KiB * KiB });
          sb.evalSync("globalThis.big = []; for (let i = 0; i < 1e6; i++) big.push({ i, s: 'x' + i }); 0", {
            timeoutMs: 120_000,
          });
          const mib = Math.round(sb.memoryUsage().usedBytes / (KiB * KiB));
          return () => {
            sb.dispose();
            return `disposed (${mib} MiB heap)`;
          };
        },
      ],
      [
        "repeated 8 MB string as host-call argument ×31",
        () => {
          const sb = new api.Sandbox();
          sb.defineAsyncFunction("take", () => 1);
          return async () => {
            try {
              return await sb.eval("const s = 'x'.repeat(8e6); await take(Array(31).fill(s))");
            } finally {
              sb.dispose();
            }
          };
        },
      ],
      ...approvalStallCases(root),
    ],
  };
}

/** Runs every class 3 times (once with `quick`); rows carry the median and the worst of the longest gaps. */
export async function runHostileCase({ quick = false, onProgress = () => {} } = {}) {
  const runs = quick ? 1 : 3;
  const api = await import(pathToFileURL(`${root}dist/index.js`).href);
  const lc = await import(pathToFileURL(`${root}dist/langchain/index.js`).href);
  const rows = [];
  const warm = classes(api, lc);
  // One-time costs (first sandbox, the transform worker, TypeScript) are not what is measured.
  for (const title of ["control", "escape-heavy", "TypeScript at the"])
    await warm.cases.find(([t]) => t.startsWith(title))[1]()();
  const codeArgument = codeArgumentClasses(lc, root);
  for (const [title, prepare] of [...warm.cases, ...codeArgument.cases]) {
    const gaps = [];
    let sample;
    for (let i = 0; i < runs; i++) {
      const work = await prepare();
      sample = await longestGap(work);
      gaps.push(sample.gapMs);
    }
    const row = {
      case: `hostile:${title}`,
      title,
      status: "ok",
      medianGapMs: median(gaps),
      maxGapMs: Math.max(...gaps),
      wallMs: sample.wallMs,
      outcome: sample.outcome.replace(/\s+/g, " ").slice(0, 100),
    };
    rows.push(row);
    onProgress(row);
  }
  warm.dispose();
  codeArgument.dispose();
  return rows;
}
