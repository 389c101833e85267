// eval(code, { inline: true }) runs the slices on the calling thread and dispatches host calls
// between them; everything else about an async eval stays the same.
import { describe, expect, it } from "vitest";
import { SandboxError } from "../../src/index.js";
import { sandbox } from "../hostile/harness.js"; // a sandbox disposed after the current test

const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe("inline async evals", () => {
  it("awaits host functions that answer at once and ones that answer later", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("now", ([x]) => Number(x) + 1);
    sb.defineAsyncFunction("later", async ([x]) => {
      await sleep(5);
      return `late ${String(x)}`;
    });
    const report = await sb.run("let s = 0; for (let i = 0; i < 100; i++) s = await now(s); [s, await later(s)]", {
      inline: true,
    });
    expect(report.ok && report.value).toEqual([100, "late 100"]);
    expect(report.stats.hostCalls).toBe(101);
  });

  it("keeps call order with off-thread evals of the same sandbox", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("echo", ([v]) => v);
    sb.evalSync("globalThis.order = []");
    const evals = Array.from({ length: 8 }, (_, i) =>
      sb.eval(`order.push(await echo(${i})); ${i}`, { inline: i % 2 === 0 }),
    );
    expect(await Promise.all(evals)).toEqual([...Array(8).keys()]);
    expect(sb.getGlobal("order")).toEqual([...Array(8).keys()]);
  });

  it("stops at its execution budget and reports the time", async () => {
    const sb = sandbox({ executionTimeoutMs: 100 });
    const report = await sb.run("while (true) {}", { inline: true });
    expect(report.ok).toBe(false);
    if (report.ok) return;
    expect(report.error.code).toBe("TIMEOUT");
    expect(report.stats.executionMs).toBeGreaterThanOrEqual(100);
    expect(await sb.eval("1 + 1", { inline: true })).toBe(2);
  });

  it("survives a host function that disposes its own sandbox mid-eval", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("selfDestruct", () => {
      sb.dispose();
      return 1;
    });
    const err = await sb.eval("await selfDestruct(); 'after'", { inline: true }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(SandboxError);
    expect((err as SandboxError).code).toBe("DISPOSED");
  });

  it("is stopped by the wall budget while it waits on a host call", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("never", () => new Promise(() => {}));
    const err = await sb.eval("await never()", { inline: true, wallTimeoutMs: 50 }).catch((e: unknown) => e);
    expect((err as SandboxError).code).toBe("TIMEOUT");
    expect((err as SandboxError).budget).toBe("wall");
  });

  it("refuses a non-boolean inline option", async () => {
    const sb = sandbox();
    await expect(sb.eval("1", { inline: "yes" as unknown as boolean })).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
    });
  });
});
