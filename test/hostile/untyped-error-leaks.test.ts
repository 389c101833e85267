// Hazard: failures that escaped as plain host errors (a RangeError, a SyntaxError, an Error) or as
// misleading data: the caller and the model read `undefined: ...` instead of a SandboxError code.
// Also: stats zeroed when the watchdog answers, and `__proto__` own keys dropped or polluting.
import { describe, expect, it } from "vitest";
import { Sandbox, SandboxError } from "../../src/index.js";
import { sandbox } from "./harness.js";

function typedFailure(fn: () => unknown): SandboxError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SandboxError);
    const e = err as SandboxError;
    expect(e.code).toBeTruthy();
    expect(e.message).not.toContain("\n");
    return e;
  }
  throw new Error("expected a failure");
}

describe("values the host cannot re-create fail as SandboxError", () => {
  it("a regular expression valid in QuickJS but not in this Node.js", async () => {
    const sb = sandbox();
    let nodeAccepts = true;
    try {
      // biome-ignore lint/complexity/useRegexLiterals: a literal Node rejects would fail to parse this file
      new RegExp("(?i:a)b");
    } catch {
      nodeAccepts = false;
    }
    if (nodeAccepts) {
      expect(sb.evalSync("/(?i:a)b/").toString()).toBe("/(?i:a)b/");
      return;
    }
    const e = typedFailure(() => sb.evalSync("/(?i:a)b/"));
    expect(e.code).toBe("UNSERIALIZABLE");
    expect(e.message).toContain("/(?i:a)b/");
    const report = await sb.run("[/(?i:a)b/]");
    expect(report.ok).toBe(false);
    if (!report.ok) expect(report.error).toBeInstanceOf(SandboxError);
  });

  it("a length-tracking view over a shrunk resizable buffer crosses with its current length", () => {
    const sb = sandbox();
    const v = sb.evalSync(
      "const rab = new ArrayBuffer(16, { maxByteLength: 32 }); const t = new Float64Array(rab); rab.resize(8); t",
    ) as Float64Array;
    expect(v).toBeInstanceOf(Float64Array);
    expect(v.length).toBe(1);
  });
});

describe("host code that disposes the sandbox mid-call", () => {
  it("a clock.now() that disposes its own sandbox gives DISPOSED", async () => {
    let sb: Sandbox;
    const make = (): Sandbox =>
      (sb = new Sandbox({
        clock: {
          now: () => {
            sb.dispose();
            return 0;
          },
        },
      }));
    expect(typedFailure(() => make().evalSync("1")).code).toBe("DISPOSED");
    await expect(make().eval("1")).rejects.toMatchObject({ code: "DISPOSED" });
    await expect(make().run("1")).rejects.toBeInstanceOf(SandboxError);
  });
});

describe("an eval the watchdog answers keeps its stats", () => {
  it("reports the host calls it made and the memory it holds", async () => {
    const sb = sandbox({ executionTimeoutMs: 50, memoryLimitBytes: 1024 * 1024 * 1024 });
    sb.defineFunction("ping", () => 1);
    // Filling a fresh 512 MiB Uint8Array is one memset that never polls the interrupt handler: far
    // more than the budget plus the watchdog's grace (about 1.7 s of CPU here). The
    // string builders used to serve, until patch 0009 made them poll.
    const report = await sb.run("ping(); ping(); const t = new Uint8Array(2 ** 29); t.fill(1); t.length");
    expect(report.ok).toBe(false);
    if (report.ok) return;
    expect(report.error.code).toBe("TIMEOUT");
    expect(report.error.message).toContain("cannot be interrupted");
    expect(report.stats.hostCalls).toBe(2);
    expect(report.stats.memoryUsedBytes).toBeGreaterThan(2 ** 27);
    expect(report.stats.peakMemoryBytes).toBeGreaterThanOrEqual(report.stats.memoryUsedBytes);
  });
});

describe("an own __proto__ key crosses intact and pollutes nothing", () => {
  it("from the host into the guest", async () => {
    const sb = sandbox();
    const parsed = JSON.parse('{"__proto__": {"polluted": true}, "ok": 1}') as object;
    sb.defineFunction("fromHost", () => parsed);
    sb.defineAsyncFunction("fromHostAsync", async () => parsed);
    sb.setGlobal("given", parsed);
    const probe =
      "(v) => [Object.keys(v), Object.hasOwn(v, '__proto__'), v.__proto__.polluted, Object.getPrototypeOf(v) === Object.prototype, ({}).polluted]";
    const expected = [["__proto__", "ok"], true, true, true, undefined];
    expect(sb.evalSync(`(${probe})(fromHost())`)).toEqual(expected);
    expect(sb.evalSync(`(${probe})(given)`)).toEqual(expected);
    expect(await sb.eval(`(${probe})(await fromHostAsync())`)).toEqual(expected);
  });

  it("from the guest to the host", () => {
    const sb = sandbox();
    let arg: Record<string, unknown> | undefined;
    sb.defineFunction("take", (v) => {
      arg = v as Record<string, unknown>;
    });
    const out = sb.evalSync(
      'const v = JSON.parse(\'{"__proto__": {"polluted": true}, "ok": 1}\'); take(v); v',
    ) as Record<string, unknown>;
    for (const v of [out, arg!]) {
      expect(Object.keys(v)).toEqual(["__proto__", "ok"]);
      expect(Object.hasOwn(v, "__proto__")).toBe(true);
      expect(Object.getPrototypeOf(v)).toBe(Object.prototype);
      expect((v.__proto__ as { polluted: boolean }).polluted).toBe(true);
    }
    expect(({} as { polluted?: boolean }).polluted).toBeUndefined();
  });
});
