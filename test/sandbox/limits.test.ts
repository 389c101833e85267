import { describe, expect, it } from "vitest";
import type { Sandbox } from "../../src/index.js";
import { sandbox, syncCodeOf } from "../hostile/harness.js";

/**
 * Runs `code` synchronously and returns [error code, the guest's CPU ms]. The CPU time, not the
 * wall time, shows where the budget stopped the guest: a loaded machine stretches only the latter.
 */
function stopped(sb: Sandbox, code: string, timeoutMs?: number): [string, number] {
  const report = sb.runSync(code, timeoutMs === undefined ? undefined : { timeoutMs });
  return [report.ok ? "no error" : report.error.code, report.stats.executionMs];
}

describe("the execution budget interrupts guest loops", () => {
  it("stops `while(true){}` with executionTimeoutMs 100 after about 100 ms of its CPU time, then evaluates 1+1", () => {
    const sb = sandbox({ executionTimeoutMs: 100 });
    const [code, ms] = stopped(sb, "while(true){}");
    expect(code).toBe("TIMEOUT");
    expect(ms).toBeGreaterThanOrEqual(100);
    expect(ms).toBeLessThan(500);
    expect(sb.evalSync("1+1")).toBe(2);
  });

  it("stops the same loop run asynchronously after about 100 ms of its CPU time, then evaluates 1+1", async () => {
    const sb = sandbox({ executionTimeoutMs: 100 });
    const report = await sb.run("while(true){}");
    expect(report.ok || report.error).toMatchObject({ code: "TIMEOUT", budget: "execution" });
    expect(report.stats.executionMs).toBeGreaterThanOrEqual(100);
    expect(report.stats.executionMs).toBeLessThan(500);
    expect(await sb.eval("1+1")).toBe(2);
  });

  it.each([
    ["catch that loops again", "while (true) { try { while (true) {} } catch (e) { globalThis.swallowed = e; } }"],
    ["finally that continues", "for (;;) { try { for (;;) {} } finally { continue; } }"],
    ["finally that spins", "try { while (true) {} } finally { while (true) {} }"],
    ["catch that spins", "try { while (true) {} } catch { while (true) {} }"],
    [
      "nested try in a recursive function",
      "function spin() { try { spin(); } catch { } finally { while (true) {} } } spin()",
    ],
    [
      "a generator that swallows",
      "function* g() { while (true) { try { yield; } catch {} } } const it = g(); while (true) { try { it.next(); it.throw(1); } catch {} }",
    ],
    [
      "an async function catching",
      "(async () => { while (true) { try { await null; } catch {} } })(); while (true) {}",
    ],
  ])("cannot be swallowed by %s", (_label, code) => {
    const sb = sandbox();
    const [result, ms] = stopped(sb, code, 150);
    expect(result).toBe("TIMEOUT");
    expect(ms).toBeLessThan(2000);
    expect(sb.evalSync("1+1")).toBe(2);
  });

  it("stops loops inside built-in callbacks (sort comparator, replace callback)", () => {
    const sb = sandbox();
    expect(stopped(sb, "[3, 2, 1].sort(() => { while (true) {} })", 150)[0]).toBe("TIMEOUT");
    expect(stopped(sb, "'abc'.replace(/b/, () => { for (;;) {} })", 150)[0]).toBe("TIMEOUT");
    expect(stopped(sb, "JSON.parse('[1]', () => { for (;;) {} })", 150)[0]).toBe("TIMEOUT");
  });

  it("stops a catastrophic regular expression", () => {
    const sb = sandbox();
    const [result, ms] = stopped(sb, "/^(a+)+$/.test('a'.repeat(40) + '!')", 200);
    expect(result).toBe("TIMEOUT");
    expect(ms).toBeLessThan(2000);
  });

  it("gives each eval a fresh budget", () => {
    const sb = sandbox({ executionTimeoutMs: 300, clock: "real" }); // the loop reads the real clock
    // Each eval burns ~150 ms; together they exceed one budget, alone none does.
    for (let i = 0; i < 3; i++) {
      expect(sb.evalSync("{ const end = Date.now() + 150; while (Date.now() < end) {} } 'done'")).toBe("done");
    }
  });
});

describe("the sandbox keeps evaluating after a limit was hit", () => {
  it("keeps globals defined before a TIMEOUT", () => {
    const sb = sandbox();
    sb.evalSync("globalThis.kept = 41");
    expect(syncCodeOf(() => sb.evalSync("while (true) {}", { timeoutMs: 100 }))).toBe("TIMEOUT");
    expect(sb.evalSync("kept + 1")).toBe(42);
  });

  it("keeps evaluating after OUT_OF_MEMORY, with memory given back", () => {
    const sb = sandbox({ memoryLimitBytes: 32 * 1024 * 1024 });
    // The hog lives in a block: once the eval ends nothing references it.
    expect(syncCodeOf(() => sb.evalSync("{ const hog = []; while (true) hog.push(new Array(1000).fill(1)); }"))).toBe(
      "OUT_OF_MEMORY",
    );
    expect(sb.evalSync("1+1")).toBe(2);
    expect(sb.evalSync("new Uint8Array(16 << 20).length")).toBe(16 << 20);
  });

  it("keeps answering when a global holds memory at the limit, and recovers once the guest lets go", () => {
    const sb = sandbox({ memoryLimitBytes: 32 * 1024 * 1024 });
    expect(syncCodeOf(() => sb.evalSync("globalThis.hog = []; while (true) hog.push(new Array(1000).fill(1));"))).toBe(
      "OUT_OF_MEMORY",
    );
    expect(sb.evalSync("hog.length > 0")).toBe(true);
    expect(syncCodeOf(() => sb.evalSync("new Uint8Array(16 << 20)"))).toBe("OUT_OF_MEMORY");
    sb.evalSync("hog = null");
    expect(sb.evalSync("new Uint8Array(16 << 20).length")).toBe(16 << 20);
  });

  it("keeps evaluating after a huge single allocation is refused", () => {
    const sb = sandbox();
    expect(syncCodeOf(() => sb.evalSync("new Uint8Array(200e6)"))).toBe("OUT_OF_MEMORY");
    expect(sb.evalSync("[1, 2, 3].map((x) => x * 2)")).toEqual([2, 4, 6]);
  });

  it("keeps evaluating after STACK_OVERFLOW, with full recursion depth again", () => {
    const sb = sandbox();
    const depth = (): number =>
      sb.evalSync("(() => { let d = 0; function g() { d++; g(); } try { g(); } catch {} return d; })()") as number;
    const before = depth();
    expect(syncCodeOf(() => sb.evalSync("function f() { return f() + 1; } f()"))).toBe("STACK_OVERFLOW");
    expect(sb.evalSync("1+1")).toBe(2);
    expect(depth()).toBeGreaterThan(before * 0.9);
  });

  it("survives alternating limit hits many times", () => {
    const sb = sandbox({ memoryLimitBytes: 16 * 1024 * 1024 });
    for (let i = 0; i < 5; i++) {
      expect(syncCodeOf(() => sb.evalSync("while (true) {}", { timeoutMs: 20 }))).toBe("TIMEOUT");
      expect(syncCodeOf(() => sb.evalSync("new ArrayBuffer(64 * 1024 * 1024)"))).toBe("OUT_OF_MEMORY");
      expect(syncCodeOf(() => sb.evalSync("(function r() { r(); })()"))).toBe("STACK_OVERFLOW");
      expect(sb.evalSync(`${i} * 2`)).toBe(i * 2);
    }
  });

  it("keeps the memory limit hard after many refused allocations", () => {
    const limit = 16 * 1024 * 1024;
    const sb = sandbox({ memoryLimitBytes: limit });
    for (let i = 0; i < 20; i++) syncCodeOf(() => sb.evalSync("new Float64Array(4e6)"));
    expect(sb.memoryUsage().peakBytes).toBeLessThanOrEqual(limit);
    expect(sb.memoryUsage().limitBytes).toBe(limit);
  });
});
