/**
 * Guest code trying to allocate past its memory limit through every door (typed arrays,
 * resizable buffers, strings, collections, the boundary itself), and hosts pushing oversized
 * values in. The limit must hold, the error must be typed, and the sandbox must stay usable.
 */
import { describe, expect, it } from "vitest";
import { restored, sandbox, syncCodeOf } from "./harness.js";

const MiB = 1024 * 1024;

describe("guest allocations past the limit", () => {
  it.each([
    ["one 200 MB typed array", "new Uint8Array(200e6)"],
    [
      "four 20 MB typed arrays kept together",
      "const keep = []; for (let i = 0; i < 4; i++) keep.push(new Float64Array(2.5e6)); keep.length",
    ],
    [
      "a resizable ArrayBuffer grown to 200 MB",
      "const rab = new ArrayBuffer(1, { maxByteLength: 1e9 }); rab.resize(200e6); rab.byteLength",
    ],
    ["ArrayBuffer.prototype.transfer to 200 MB", "new ArrayBuffer(8).transfer(200e6).byteLength"],
    [
      "a typed array copied with slice until full",
      "let t = new Uint8Array(8e6); const all = []; for (let i = 0; i < 20; i++) all.push(t.slice()); all.length",
    ],
    [
      "a string doubled until full",
      "let s = 'x'.repeat(1 << 20); const parts = []; for (;;) { parts.push(s); s = s + 'y'; }",
    ],
    ["a Map grown until full", "const m = new Map(); for (let i = 0; ; i++) m.set(i, { i });"],
    ["an array of arrays grown until full", "const rows = []; for (;;) rows.push(new Array(1024).fill(0));"],
    [
      "Array.prototype.concat of large arrays",
      "let a = new Array(1e6).fill(1); const kept = []; for (;;) kept.push(a = a.concat(a));",
    ],
    ["String.prototype.padEnd to 200 MB", "''.padEnd(200e6, 'ab').length"],
    [
      "JSON.stringify of a wide value into a huge string",
      "const wide = new Array(2e6).fill('abcdefghij'); const out = []; for (;;) out.push(JSON.stringify(wide));",
    ],
  ])("refuses %s with OUT_OF_MEMORY under 32 MiB", (_label, code) => {
    const limit = 32 * MiB;
    const sb = sandbox({ memoryLimitBytes: limit });
    // A block scope: once the eval ends, nothing the bomb allocated is reachable.
    const result = syncCodeOf(() => sb.evalSync(`{ ${code} }`, { timeoutMs: 20_000 }));
    // Strings hit QuickJS's own length cap first in some cases; that is a guest error, still refused.
    expect(["OUT_OF_MEMORY", "GUEST_ERROR"]).toContain(result);
    expect(sb.memoryUsage().peakBytes).toBeLessThanOrEqual(limit + 1 * MiB);
    expect(sb.evalSync("1+1")).toBe(2);
  });

  it("still evaluates code, and lets the guest free memory, when its globals fill the limit", () => {
    const sb = sandbox({ memoryLimitBytes: 32 * MiB });
    expect(
      syncCodeOf(() =>
        sb.evalSync("globalThis.hoard = new Map(); for (let i = 0; ; i++) hoard.set(i, { i });", { timeoutMs: 20_000 }),
      ),
    ).toBe("OUT_OF_MEMORY");
    expect(sb.evalSync("1+1")).toBe(2);
    sb.evalSync("hoard = null");
    expect(sb.evalSync("new Uint8Array(16 << 20).length")).toBe(16 << 20);
  });

  it("refuses an allocation bomb on the executor thread too", async () => {
    const sb = sandbox({ memoryLimitBytes: 32 * MiB });
    await expect(sb.eval("await null; new Uint8Array(200e6)")).rejects.toMatchObject({ code: "OUT_OF_MEMORY" });
    expect(await sb.eval("1+1")).toBe(2);
  });

  it("keeps the host process's RSS bounded while a guest hits its limit", () => {
    const sb = sandbox({ memoryLimitBytes: 32 * MiB });
    const before = process.memoryUsage.rss();
    for (let i = 0; i < 5; i++)
      syncCodeOf(() => sb.evalSync("{ const hold = []; for (;;) hold.push(new Uint8Array(1 << 20)); }"));
    expect(process.memoryUsage.rss() - before).toBeLessThan(96 * MiB);
  });

  it("gives memory back after an async eval that ran out of memory", async () => {
    const sb = sandbox({ memoryLimitBytes: 64 * MiB });
    await expect(
      sb.eval("{ const grow = []; await null; for (;;) grow.push(new Uint8Array(1 << 20)); }"),
    ).rejects.toMatchObject({ code: "OUT_OF_MEMORY" });
    // Block-scoped, so unreachable once the eval ended (top-level const would be a lasting global).
    expect(await sb.eval("new Uint8Array(40e6).length")).toBe(40e6);
  });

  it("gives memory back after an async eval that timed out", async () => {
    const sb = sandbox({ memoryLimitBytes: 64 * MiB });
    await expect(
      sb.eval("{ const big = new Uint8Array(40e6); await null; while (true) {} }", { timeoutMs: 100 }),
    ).rejects.toMatchObject({ code: "TIMEOUT" });
    expect(await sb.eval("new Uint8Array(40e6).length")).toBe(40e6);
  });

  it("gives memory back after an async eval that hit the wall budget while waiting", async () => {
    const sb = sandbox({ memoryLimitBytes: 64 * MiB });
    sb.defineAsyncFunction("never", () => new Promise(() => {}));
    await expect(
      sb.eval("{ const big = new Uint8Array(40e6); await never(); }", { wallTimeoutMs: 200 }),
    ).rejects.toMatchObject({ code: "TIMEOUT", budget: "wall" });
    expect(await sb.eval("new Uint8Array(40e6).length")).toBe(40e6);
  });
});

// Built-ins that allocated through the runtime-level allocator failed without raising anything
// (patch 0007): guest `catch` received the engine's internal "no exception" value (typeof
// "unknown"), the host reported GUEST_ERROR "[object]", and a snapshot dropped what was caught.
describe("an allocation failure inside a built-in is the engine's out-of-memory error", () => {
  // Under 32 MiB: 3 MB of 'é', its 12 MB UTF-32 copy, then the decomposition (twice as long) fails.
  const NORMALIZE = "'\\u00e9'.repeat(3e6).normalize('NFD').length";
  // Every repetition of the group leaves a backtracking point: 4M of them exceed 32 MiB.
  const REGEXP = "/(?:a|b)*c/.exec('a'.repeat(4e6))";

  it.each([
    ["String.prototype.normalize", NORMALIZE],
    ["RegExp.prototype.exec out of backtracking stack", REGEXP],
  ])("%s: guest catch gets an InternalError, uncaught it is OUT_OF_MEMORY", (_label, code) => {
    const sb = sandbox({ memoryLimitBytes: 32 * MiB });
    const caughtInGuest = sb.evalSync(
      `try { ${code}; 'no error' } catch (e) { typeof e === 'object' && e !== null ? String(e) : typeof e }`,
    );
    expect(caughtInGuest).toBe("InternalError: out of memory");
    expect(syncCodeOf(() => sb.evalSync(code))).toBe("OUT_OF_MEMORY");
    expect(sb.evalSync("1+1")).toBe(2);
  });

  it("keeps what the guest caught from normalize in a snapshot", () => {
    const sb = sandbox({ memoryLimitBytes: 32 * MiB });
    sb.evalSync(`try { ${NORMALIZE} } catch (e) { globalThis.kept = e }`);
    const copy = restored(sb.snapshot());
    expect(copy.evalSync("String(kept)")).toBe("InternalError: out of memory");
  });
});

describe("oversized values at the boundary", () => {
  it("refuses a host value larger than the guest's memory with OUT_OF_MEMORY, and stays usable", () => {
    const sb = sandbox({ memoryLimitBytes: 32 * MiB });
    expect(syncCodeOf(() => sb.setGlobal("big", new Uint8Array(100e6)))).toBe("OUT_OF_MEMORY");
    expect(sb.evalSync("typeof big")).toBe("undefined");
    expect(sb.evalSync("1+1")).toBe(2);
  });

  it("turns an oversized sync host result into a catchable guest error", () => {
    const sb = sandbox({ memoryLimitBytes: 32 * MiB });
    sb.defineFunction("huge", () => new Uint8Array(100e6));
    expect(sb.evalSync("try { huge(); 'copied' } catch (e) { e instanceof Error }")).toBe(true);
    expect(sb.evalSync("1+1")).toBe(2);
  });

  it("turns an oversized async host result into a catchable guest rejection", async () => {
    const sb = sandbox({ memoryLimitBytes: 32 * MiB });
    sb.defineAsyncFunction("huge", async () => new Uint8Array(100e6));
    expect(await sb.eval("try { await huge(); 'copied' } catch (e) { e instanceof Error }")).toBe(true);
    expect(await sb.eval("1+1")).toBe(2);
  });

  it("copies a large result that fits in the guest's memory out", () => {
    const sb = sandbox({ memoryLimitBytes: 64 * MiB });
    expect((sb.evalSync("'y'.repeat(20e6)") as string).length).toBe(20e6);
    expect((sb.evalSync("new Uint8Array(20e6).fill(3)") as Uint8Array)[19_999_999]).toBe(3);
  });

  it("copies a doubling DAG out in linear time, keeping shared identity", () => {
    const sb = sandbox();
    // Expanded, the 2^40 leaves would never be copied: the copy must keep every level shared.
    let node = sb.evalSync("let dag = [1]; for (let i = 0; i < 40; i++) dag = [dag, dag]; dag") as unknown[];
    for (let i = 0; i < 40; i++) {
      expect(node[0]).toBe(node[1]);
      node = node[0] as unknown[];
    }
    expect(node).toEqual([1]);
  });

  it("logs a doubling DAG without blowing up the console", () => {
    const sb = sandbox();
    const report = sb.runSync(
      "let dag2 = [1]; for (let i = 0; i < 40; i++) dag2 = [dag2, dag2]; console.log(dag2); 'ok'",
    );
    expect(report.ok).toBe(true);
    expect(report.console).toHaveLength(1);
    expect(report.console[0]!.text.length).toBeLessThan(1 * MiB);
  });
});
