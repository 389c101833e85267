// Sync host calls of inline evals pass primitive arguments and results without the codec; every
// value must come out exactly as the codec would copy it.
import { describe, expect, it } from "vitest";
import { sandbox } from "../hostile/harness.js"; // a sandbox disposed after the current test

describe("sync host calls with primitive arguments and results", () => {
  it("copies numbers, booleans, null, undefined and strings exactly, both ways", () => {
    const sb = sandbox();
    const seen: unknown[][] = [];
    sb.defineFunction("echo", (...args: unknown[]) => {
      seen.push(args);
      return args[0];
    });
    const cases = [
      "-0",
      "NaN",
      "Infinity",
      "2 ** 31",
      "-(2 ** 31)",
      "0.1",
      "2 ** 53 + 2",
      "true",
      "false",
      "null",
      "undefined",
      "''",
      "'\\u00e9t\\u00e9 \\ud83d\\ude00'",
      "'\\ud800 lone'",
      "'a\\0b'",
    ];
    for (const c of cases) {
      expect(sb.evalSync(`Object.is(echo(${c}), ${c})`), c).toBe(true);
    }
    expect(Object.is(seen[0]![0], -0)).toBe(true);
    expect(seen.find((a) => a[0] === "\ud800 lone")).toBeDefined();
    expect(sb.evalSync("typeof echo(undefined, 1, 'x') + typeof echo()")).toBe("undefinedundefined");
    expect(seen.at(-2)).toEqual([undefined, 1, "x"]);
    expect(seen.at(-1)).toEqual([]);
  });

  it("falls back to the codec for long strings, more arguments and objects, with the same results", () => {
    const sb = sandbox();
    sb.defineFunction("echo", (...args: unknown[]) => (args.length > 1 ? args : args[0]));
    sb.defineFunction("make", (kind: unknown) =>
      kind === "object" ? { a: [1, 2n] } : kind === "long" ? "y".repeat(300) : new Map([[1, 2]]),
    );
    expect(sb.evalSync("echo('x'.repeat(1000)).length")).toBe(1000);
    expect(sb.evalSync("echo(1, 2, 3, 4)")).toEqual([1, 2, 3, 4]);
    expect(sb.evalSync("echo({ k: 1 })")).toEqual({ k: 1 });
    expect(sb.evalSync("echo(10n)")).toBe(10n);
    expect(sb.evalSync("make('object')")).toEqual({ a: [1, 2n] });
    expect(sb.evalSync("make('long').length")).toBe(300);
    expect(sb.evalSync("make('map') instanceof Map")).toBe(true);
  });

  it("turns a host throw into a guest Error and a returned promise into a TypeError", () => {
    const sb = sandbox();
    sb.defineFunction("fail", () => {
      throw new RangeError("nope");
    });
    sb.defineFunction("later", () => Promise.resolve(1));
    expect(sb.evalSync("try { fail(1) } catch (e) { [e.name, e.message] }")).toEqual(["RangeError", "nope"]);
    expect(sb.evalSync("try { later() } catch (e) { e.name }")).toBe("TypeError");
  });

  it("keeps each call's numbers apart when a host function makes number calls into another sandbox", () => {
    // Numbers cross through one array shared by every sandbox of the thread: the inner calls must
    // not change the outer call's arguments, nor leave their answer behind as the outer one's.
    const inner = sandbox();
    inner.defineFunction("half", (n: unknown) => Number(n) / 2);
    const outer = sandbox();
    const seen: unknown[][] = [];
    outer.defineFunction("mix", (a: unknown, b: unknown, c: unknown) => {
      const nested = inner.evalSync("half(7) + half(-0.5)");
      seen.push([a, b, c, nested]);
      return typeof c === "string" ? c : Number(a) + Number(b) + Number(nested);
    });
    expect(outer.evalSync("[mix(1, 2.5, 3), mix(-0, 2 ** 53, 'text'), mix(0.25, true, null)]")).toEqual([
      6.75,
      "text",
      4.5,
    ]);
    expect(seen).toEqual([
      [1, 2.5, 3, 3.25],
      [-0, 2 ** 53, "text", 3.25],
      [0.25, true, null, 3.25],
    ]);
    expect(Object.is(seen[1]![0], -0)).toBe(true);
  });

  it("refuses re-entry from the host function and counts the calls", () => {
    const sb = sandbox();
    sb.defineFunction("reenter", () => {
      try {
        sb.evalSync("1");
        return "entered";
      } catch (err) {
        return (err as { code?: string }).code;
      }
    });
    const report = sb.runSync("[reenter(), reenter(1)]");
    expect(report.ok && report.value).toEqual(["BUSY", "BUSY"]);
    expect(report.stats.hostCalls).toBe(2);
  });

  it("keeps the host function's time out of the guest's execution budget and executionMs", () => {
    const sb = sandbox();
    // 8 calls of 40 ms of host work: 320 ms, well past the guest's 200 ms budget.
    sb.defineFunction("work", (ms: unknown) => {
      const until = Date.now() + Number(ms);
      while (Date.now() < until);
      return 1;
    });
    const report = sb.runSync("let n = 0; for (let i = 0; i < 8; i++) n += work(40); n", { timeoutMs: 200 });
    expect(report.ok && report.value).toBe(8);
    expect(report.stats.wallMs).toBeGreaterThanOrEqual(300);
    expect(report.stats.executionMs).toBeLessThan(150);
  });
});
