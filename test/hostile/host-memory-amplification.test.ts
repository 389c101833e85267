// Hazard: one guest allocation becoming many host copies. A string referenced 31 times is one
// guest string but 31 host strings: a guest using 8 MiB made the host materialize 248 MB for one
// result, and six un-awaited async host calls with such arguments added 1.9 GB of RSS. Every
// byte one eval hands the host now counts against one copy budget (`copyLimitBytes`, default
// `memoryLimitBytes`), checked before the host allocates; past it the eval fails with COPY_LIMIT.
import { describe, expect, it } from "vitest";
import { SandboxError } from "../../src/index.js";
import { codeOf, sandbox } from "./harness.js";

const MiB = 1024 * 1024;
const EIGHT_MB = "globalThis.s = 'x'.repeat(8_000_000);";

describe("one copy budget per eval", () => {
  it("refuses a result that repeats one 8 MB string 31 times (default budget: memoryLimitBytes)", async () => {
    const sb = sandbox();
    const report = await sb.run(`${EIGHT_MB} Array(31).fill(s)`);
    expect(report.ok).toBe(false);
    if (report.ok) return;
    expect(report.error).toBeInstanceOf(SandboxError);
    expect(report.error.code).toBe("COPY_LIMIT");
    expect(report.error.message).toContain(String(64 * MiB));
    expect(report.error.message).toContain("copyLimitBytes");
    expect(await codeOf(() => sb.evalSync(`${EIGHT_MB} Array(31).fill(s)`))).toBe("COPY_LIMIT");
    // The sandbox stays usable, and a result under the budget still crosses.
    expect(await sb.eval(`${EIGHT_MB} Array(7).fill(s).length`)).toBe(7);
    expect(((await sb.eval(`${EIGHT_MB} Array(7).fill(s)`)) as string[]).length).toBe(7);
  });

  it("stops at the value that would cross the budget, not after it", async () => {
    const sb = sandbox({ copyLimitBytes: 1 * MiB });
    expect(await codeOf(() => sb.evalSync("['a'.repeat(600_000), 'b'.repeat(600_000)]"))).toBe("COPY_LIMIT");
    expect((sb.evalSync("['a'.repeat(400_000), 'b'.repeat(400_000)]") as string[]).length).toBe(2);
  });

  it("counts un-awaited async host-call arguments: the host receives at most the budget", async () => {
    const sb = sandbox({ copyLimitBytes: 20 * MiB });
    let received = 0;
    sb.defineAsyncFunction("put", async ([s]) => {
      received += (s as string).length;
      return 1;
    });
    const report = await sb.run(`${EIGHT_MB} for (let i = 0; i < 6; i++) put(s); 'done'`);
    expect(report.ok).toBe(false);
    if (!report.ok) expect(report.error.code).toBe("COPY_LIMIT");
    expect(received).toBeLessThanOrEqual(20 * MiB);
  });

  it("counts sync host-call arguments, and the guest cannot catch the refusal", async () => {
    const sb = sandbox({ copyLimitBytes: 20 * MiB });
    let calls = 0;
    sb.defineFunction("put", () => void calls++);
    const code = `${EIGHT_MB} let n = 0; for (let i = 0; i < 6; i++) { try { put(s); n++; } catch {} } 'caught: ' + n`;
    expect(await codeOf(() => sb.evalSync(code))).toBe("COPY_LIMIT");
    expect(calls).toBe(2);
  });

  it("counts the thrown value", async () => {
    const sb = sandbox({ copyLimitBytes: 1 * MiB });
    expect(await codeOf(() => sb.eval("throw new Error('x'.repeat(2_000_000))"))).toBe("COPY_LIMIT");
  });

  it("cuts console output at the budget instead of failing the eval", async () => {
    const sb = sandbox({ copyLimitBytes: 256 * 1024, maxConsoleBytes: 64 * MiB });
    const report = await sb.run("for (let i = 0; i < 100; i++) console.log('c'.repeat(10_000)); 'result'");
    expect(report.ok).toBe(true);
    if (!report.ok) return;
    expect(report.value).toBe("result");
    expect(report.consoleTruncated).toBe(true);
    expect(report.console.length).toBeLessThan(100);
  });

  it("resets the budget for every eval", async () => {
    const sb = sandbox({ copyLimitBytes: 1 * MiB });
    for (let i = 0; i < 5; i++) expect(((await sb.eval("'r'.repeat(800_000)")) as string).length).toBe(800_000);
  });

  it("validates the option", async () => {
    expect(await codeOf(() => sandbox({ copyLimitBytes: 0 }))).toBe("INVALID_ARGUMENT");
    expect(sandbox({ memoryLimitBytes: 8 * MiB }).options.copyLimitBytes).toBe(8 * MiB);
  });
});
