import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Sandbox, SandboxError } from "../../src/index.js";

let sb: Sandbox;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(() => sb.dispose());

const MiB = 1024 * 1024;

describe("host functions at dotted paths", () => {
  it("creates the namespace objects of a dotted path", () => {
    sb.defineFunction("tools.search.web", (q) => `results for ${String(q)}`);
    expect(sb.evalSync("[typeof tools, typeof tools.search, tools.search.web('cats')]")).toEqual([
      "object",
      "object",
      "results for cats",
    ]);
  });

  it("keeps sibling functions in one namespace", () => {
    sb.defineFunction("tools.a", () => "a");
    sb.defineAsyncFunction("tools.b", async () => "b");
    expect(sb.evalSync("tools.a()")).toBe("a");
    return expect(sb.eval("await tools.b()")).resolves.toBe("b");
  });

  it("replaces a function defined again at the same path", () => {
    sb.defineFunction("tool", () => "first");
    sb.defineFunction("tool", () => "second");
    expect(sb.evalSync("tool()")).toBe("second");
  });

  it("refuses a path through a guest value that is not a plain object", () => {
    sb.evalSync("globalThis.prim = 5");
    let code: string | undefined;
    try {
      sb.defineFunction("prim.x", () => 1);
    } catch (err) {
      code = (err as SandboxError).code;
    }
    expect(code).toBe("INVALID_ARGUMENT");
    expect(sb.evalSync("prim")).toBe(5);
  });

  it("passes every argument, and undefined for missing ones", () => {
    const calls: unknown[][] = [];
    sb.defineFunction("spy", (...args) => {
      calls.push(args);
      return args.length;
    });
    expect(sb.evalSync("[spy(), spy(1, undefined, 'x')]")).toEqual([0, 3]);
    expect(calls).toEqual([[], [1, undefined, "x"]]);
  });
});

describe("setGlobal and getGlobal", () => {
  it("replaces a global on a second setGlobal", () => {
    sb.setGlobal("cfg", { v: 1 });
    sb.setGlobal("cfg", { v: 2 });
    expect(sb.evalSync("cfg.v")).toBe(2);
  });

  it("reads a guest global set by guest code, and undefined for a missing one", () => {
    sb.evalSync("globalThis.answer = { n: 42 }");
    expect(sb.getGlobal("answer")).toEqual({ n: 42 });
    expect(sb.getGlobal("missing")).toBeUndefined();
  });

  it("keeps top-level declarations of sync and async evals for later evals", async () => {
    sb.evalSync("const fromSync = 1; let mutable = 2; class Kept {}");
    await sb.eval("const fromAsync = await Promise.resolve(3)");
    expect(sb.evalSync("[fromSync, mutable, typeof Kept, fromAsync]")).toEqual([1, 2, "function", 3]);
  });

  it("keeps globals across evals of both kinds", async () => {
    sb.evalSync("globalThis.counter = 1");
    await sb.eval("counter++; await null; counter++");
    expect(sb.evalSync("counter")).toBe(3);
  });
});

describe("memory usage and per-eval stats", () => {
  it("reports the configured limit and what the runtime holds", () => {
    const small = new Sandbox({ memoryLimitBytes: 8 * MiB });
    try {
      const before = small.memoryUsage();
      expect(before.limitBytes).toBe(8 * MiB);
      small.evalSync("globalThis.held = new Uint8Array(2 * 1024 * 1024)");
      const after = small.memoryUsage();
      expect(after.usedBytes - before.usedBytes).toBeGreaterThanOrEqual(2 * MiB);
      expect(after.peakBytes).toBeGreaterThanOrEqual(after.usedBytes);
    } finally {
      small.dispose();
    }
  });

  it("reports an eval's peak memory above what it left behind", () => {
    const report = sb.runSync("{ const temp = new Uint8Array(10e6); temp.length }");
    expect(report.ok).toBe(true);
    expect(report.stats.peakMemoryBytes).toBeGreaterThanOrEqual(10e6);
    expect(report.stats.memoryUsedBytes).toBeLessThan(report.stats.peakMemoryBytes);
  });

  it("reports failures as data with console and stats from run()", async () => {
    const report = await sb.run("console.log('working'); throw new Error('nope')");
    expect(report.ok).toBe(false);
    if (report.ok) return;
    expect(report.error).toBeInstanceOf(SandboxError);
    expect(report.error.code).toBe("GUEST_ERROR");
    expect(report.console).toEqual([{ level: "log", text: "working" }]);
    expect(report.stats.wallMs).toBeGreaterThanOrEqual(report.stats.executionMs);
  });

  it("counts guest execution time, not host waits", async () => {
    sb.defineAsyncFunction("wait", ([ms]) => new Promise((r) => setTimeout(r, Number(ms))));
    const report = await sb.run("await wait(300); 1");
    expect(report.stats.wallMs).toBeGreaterThanOrEqual(290);
    expect(report.stats.executionMs).toBeLessThan(100);
    expect(report.stats.hostCalls).toBe(1);
  });
});
