// The executor's thread cap comes from QJSN_EXECUTOR_THREADS, read when the first async eval
// starts; vitest runs each file in a process of its own, so this file sets its own cap.
process.env.QJSN_EXECUTOR_THREADS = "2";

import { describe, expect, it } from "vitest";
import { SandboxError } from "../../src/index.js";
import { native } from "../../src/native.js";
import { sandbox } from "../hostile/harness.js"; // a sandbox disposed after the current test

const CAP = 2;
// Budgets are CPU time and two threads get a small share of a loaded machine: 5 × 150 ms of CPU
// outlasted the 30 s default timeout (with load 25 on 2 cores, at nice 10).
const CAPPED_TIMEOUT_MS = 120_000;

describe("the executor's thread cap", () => {
  it(
    "never runs guest code on more executor threads at once than QJSN_EXECUTOR_THREADS, and every eval still runs",
    async () => {
      expect(native.executorThreads()[1]).toBe(CAP);
      let maxSeen = 0;
      const sampler = setInterval(() => (maxSeen = Math.max(maxSeen, native.executorThreads()[0])), 5);
      const reports = await Promise.all(
        Array.from({ length: 5 }, () => sandbox({ executionTimeoutMs: 150 }).run("while (true) {}")),
      );
      clearInterval(sampler);
      maxSeen = Math.max(maxSeen, native.executorThreads()[0]);
      expect(reports.map((r) => (r.ok ? "ok" : r.error.code))).toEqual(Array(5).fill("TIMEOUT"));
      expect(maxSeen).toBeGreaterThan(0);
      expect(maxSeen).toBeLessThanOrEqual(CAP);
    },
    CAPPED_TIMEOUT_MS,
  );

  it(
    "queues an eval past the cap until a running guest's time slice ends, not until the guest ends",
    async () => {
      const settled: string[] = [];
      const spinners = Array.from({ length: CAP }, (_, i) =>
        sandbox({ executionTimeoutMs: 200 })
          .run("while (true) {}")
          .then(() => settled.push(`spinner ${i}`)),
      );
      const probe = sandbox()
        .eval("1 + 1")
        .then((v) => settled.push(`probe ${String(v)}`));
      await Promise.all([...spinners, probe]);
      expect(settled[0]).toBe("probe 2");
    },
    CAPPED_TIMEOUT_MS,
  );

  it(
    "gives the slot of a guest stuck in a built-in back once the watchdog answers it",
    async () => {
      // Both threads held by guests stuck in a built-in that ignores interrupts: neither can hand its
      // turn over at the end of a time slice, so only the watchdog frees a slot for the probe.
      const stuck = Array.from({ length: CAP }, () => {
        const sb = sandbox({ memoryLimitBytes: 512 * 1024 * 1024, executionTimeoutMs: 20 });
        sb.evalSync("globalThis.s = ' '.repeat(2 ** 28); 0", { timeoutMs: 60_000 });
        return sb;
      });
      const settled: string[] = [];
      const stuckEvals = stuck.map((sb) =>
        sb.eval("s.lastIndexOf('x')").catch((err: unknown) => {
          settled.push("stuck");
          return err;
        }),
      );
      const probe = sandbox()
        .eval("1 + 1")
        .then((v) => {
          settled.push("probe");
          return v;
        });
      const errors = await Promise.all(stuckEvals);
      expect(await probe).toBe(2);
      for (const err of errors) {
        expect(err).toBeInstanceOf(SandboxError);
        expect((err as SandboxError).code).toBe("TIMEOUT");
        expect((err as SandboxError).message).toContain("cannot be interrupted");
      }
      expect(settled[0]).toBe("stuck");
    },
    CAPPED_TIMEOUT_MS,
  );
});
