// Hazard: more sessions spin than the executor may run at once (QJSN_EXECUTOR_THREADS). Past the
// cap an eval waited for a running guest to end: six spinners at cap 4 held a trivial eval for
// 3.9 s, and 65 hostile sessions at the default cap held every other session for up to a minute.
// Now a guest that has used a time slice while others wait hands its turn over.
// The cap is read when the first async eval starts; vitest runs each file in a process of its own.
process.env.QJSN_EXECUTOR_THREADS = "2";

import { describe, expect, it, vi } from "vitest";
import type { EvalReport } from "../../src/index.js";
import { native } from "../../src/native.js";
import { sandbox } from "./harness.js"; // a sandbox disposed after the current test

const CAP = 2;
const SPINNERS = CAP + 2;
// Guests get a small share of a loaded machine's cores: generous, and never reached when it passes.
const TIMEOUT_MS = 180_000;

describe("spinning sessions past the executor's cap", () => {
  it(
    "answer a trivial eval of another session before any spinner has used its CPU budget",
    async () => {
      expect(native.executorThreads()[1]).toBe(CAP);
      const settled: string[] = [];
      // 3 s of CPU each: before time slices the probe waited for two of them to use it all.
      const spinners = Array.from({ length: SPINNERS }, () =>
        sandbox({ executionTimeoutMs: 3_000, wallTimeoutMs: 600_000 }),
      );
      const runs = spinners.map((sb, i) =>
        sb.run("while (true) {}").then((report) => {
          settled.push(`spinner ${i}`);
          return report;
        }),
      );
      const probe = sandbox();
      expect(await probe.eval("1 + 1")).toBe(2);
      settled.push("probe");
      for (const sb of spinners) sb.dispose();
      const reports: EvalReport[] = await Promise.all(runs);
      expect(settled[0]).toBe("probe");
      // A spinner parked mid-slice (waiting for its turn) stops at once when its sandbox is disposed.
      expect(reports.map((r) => (r.ok ? "ok" : r.error.code))).toEqual(Array(SPINNERS).fill("DISPOSED"));
      // A stopped spinner unwinds holding a turn, briefly over the cap (guest_turns.h unpark), and its
      // outcome may arrive before it lets go: the turns held come back within the cap.
      await vi.waitFor(() => expect(native.executorThreads()[0]).toBeLessThanOrEqual(CAP), { timeout: 30_000 });
    },
    TIMEOUT_MS,
  );

  it(
    "still give every spinner its whole CPU budget, counted without the time it waited for a turn",
    async () => {
      const budgetMs = 200;
      let maxRunning = 0;
      const sampler = setInterval(() => (maxRunning = Math.max(maxRunning, native.executorThreads()[0])), 2);
      const reports = await Promise.all(
        Array.from({ length: SPINNERS }, () =>
          sandbox({ executionTimeoutMs: budgetMs, wallTimeoutMs: 600_000 }).run("while (true) {}"),
        ),
      );
      clearInterval(sampler);
      for (const report of reports) {
        expect(report.ok).toBe(false);
        if (report.ok) continue;
        // An execution timeout, not the watchdog taking a parked guest for one stuck in a built-in.
        expect(report.error.code).toBe("TIMEOUT");
        expect(report.error.budget).toBe("execution");
        expect(report.error.message).not.toContain("cannot be interrupted");
        expect(report.stats.executionMs).toBeGreaterThanOrEqual(budgetMs);
        expect(report.stats.executionMs).toBeLessThanOrEqual(report.stats.wallMs);
      }
      expect(maxRunning).toBeLessThanOrEqual(CAP);
    },
    TIMEOUT_MS,
  );

  it(
    "keep one session's evals in call order while they take turns with spinners",
    async () => {
      const spinners = Array.from({ length: SPINNERS }, () =>
        sandbox({ executionTimeoutMs: 300, wallTimeoutMs: 600_000 }).run("while (true) {}"),
      );
      const sb = sandbox();
      sb.defineAsyncFunction("echo", ([v]) => v);
      sb.evalSync("globalThis.order = []");
      // Each eval computes long enough to be handed over mid-slice now and then.
      const evals = Array.from({ length: 8 }, (_, i) =>
        sb.eval(`for (let j = 0; j < 2e5; j++) {} order.push(await echo(${i})); ${i}`),
      );
      expect(await Promise.all(evals)).toEqual([...Array(8).keys()]);
      expect(sb.getGlobal("order")).toEqual([...Array(8).keys()]);
      await Promise.all(spinners);
    },
    TIMEOUT_MS,
  );
});
