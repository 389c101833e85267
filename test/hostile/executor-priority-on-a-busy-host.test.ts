// Hazard: executor threads ran at nice 10, below every ordinary process on the machine, not only
// below the Node event loop: beside two busy loops of ordinary priority an eval of 1.4 s of CPU
// took 12-16 s off-thread (2.1 s on the main thread), and since budgets count CPU nothing fired.
// The outcome checked: the thread that ran a guest has the scheduling class and nice value of the
// process's main thread, as the kernel reports them (Linux: /proc/self/task/<tid>/stat).
import { readdirSync, readFileSync } from "node:fs";
import { describe, expect, it } from "vitest";
import { sandbox } from "./harness.js"; // a sandbox disposed after the current test

interface TaskStat {
  tid: string;
  cpuTicks: number; // utime + stime
  nice: number;
  policy: number;
}

/** Every thread of this process, from /proc/self/task/<tid>/stat (fields after the command name). */
function tasks(): TaskStat[] {
  return readdirSync("/proc/self/task").flatMap((tid) => {
    let text: string;
    try {
      text = readFileSync(`/proc/self/task/${tid}/stat`, "utf8");
    } catch {
      return []; // the thread exited meanwhile
    }
    // Field 3 (state) onwards; the command name (field 2) may hold spaces and parentheses.
    const f = text.slice(text.lastIndexOf(")") + 2).split(" ");
    return [{ tid, cpuTicks: Number(f[11]) + Number(f[12]), nice: Number(f[16]), policy: Number(f[38]) }];
  });
}

describe.skipIf(process.platform !== "linux")("executor threads on a busy host", () => {
  it("run guests at the scheduling class and nice value of the main thread, not below ordinary processes", async () => {
    const before = new Map(tasks().map((t) => [t.tid, t.cpuTicks]));
    // 300 ms of the guest's own CPU: 30 clock ticks on the thread that runs it.
    const report = await sandbox({ executionTimeoutMs: 300, wallTimeoutMs: 600_000 }).run("while (true) {}");
    expect(report.ok).toBe(false);
    const after = tasks();
    const main = after.find((t) => t.tid === String(process.pid));
    expect(main).toBeDefined();
    // The thread that ran the guest: the one whose CPU time grew the most, other than the main thread.
    const grown = after
      .filter((t) => t.tid !== String(process.pid))
      .map((t) => ({ ...t, grew: t.cpuTicks - (before.get(t.tid) ?? 0) }))
      .sort((a, b) => b.grew - a.grew);
    const executor = grown[0];
    expect(executor.grew).toBeGreaterThanOrEqual(10);
    expect({ policy: executor.policy, nice: executor.nice }).toEqual({ policy: main?.policy, nice: main?.nice });
  }, 120_000);
});
