// Hazard: a guest that calls an async host function in a loop without awaiting it makes the host
// hold the state of every call in flight (issue 27, item 8: a 64 MiB guest on a slow, well-behaved
// host function had the host hold 415-438 MiB for 130,885 calls). Calls in flight are capped per
// eval (maxHostCallsInFlight, HOST_CALL_LIMIT) and their host-side state counts against
// copyLimitBytes while they last (COPY_LIMIT); calls that settle give their room back.
import { describe, expect, it } from "vitest";
import { SANDBOX_DEFAULTS } from "../../src/options.js";
import { sandbox } from "./harness.js";

/** A slow, well-behaved async host function, and how many calls it has been given. */
function slowHost(delayMs: number): { fn: () => Promise<number>; calls: () => number } {
  let calls = 0;
  return {
    fn: () => {
      calls++;
      return new Promise((resolve) => setTimeout(resolve, delayMs, 1).unref());
    },
    calls: () => calls,
  };
}

describe("async host calls in flight are bounded per eval", () => {
  it("an endless loop of unawaited calls ends with HOST_CALL_LIMIT at the default cap", async () => {
    const host = slowHost(60_000);
    const sb = sandbox({ memoryLimitBytes: 32 * 1024 * 1024 });
    sb.defineAsyncFunction("h", host.fn);
    const report = await sb.run("for (let i = 0; ; i++) h(i)");
    expect(report.ok ? "ok" : report.error.code).toBe("HOST_CALL_LIMIT");
    expect(host.calls()).toBeLessThanOrEqual(SANDBOX_DEFAULTS.maxHostCallsInFlight);
    expect(await sb.eval("1 + 1")).toBe(2);
  });

  it("a smaller cap holds exactly: a Promise.all of the cap passes, one more call fails", async () => {
    const host = slowHost(1);
    const sb = sandbox({ maxHostCallsInFlight: 100 });
    sb.defineAsyncFunction("h", host.fn);
    expect(await sb.eval("(await Promise.all(Array.from({ length: 100 }, (_, i) => h(i)))).length")).toBe(100);
    const report = await sb.run("await Promise.all(Array.from({ length: 101 }, (_, i) => h(i)))");
    expect(report.ok ? "ok" : report.error.code).toBe("HOST_CALL_LIMIT");
    expect(report.ok ? "" : report.error.message).toContain("maxHostCallsInFlight");
  });

  it("the limit is uncatchable: a guest cannot swallow it and go on calling", async () => {
    const host = slowHost(60_000);
    const sb = sandbox({ maxHostCallsInFlight: 10 });
    sb.defineAsyncFunction("h", host.fn);
    const report = await sb.run("for (let i = 0; i < 1000; i++) { try { h(i) } catch {} } 'went on'");
    expect(report.ok ? "ok" : report.error.code).toBe("HOST_CALL_LIMIT");
    expect(host.calls()).toBeLessThanOrEqual(10);
  });

  it("calls that settle give their room back: sequential awaited calls never hit the cap", async () => {
    const sb = sandbox({ maxHostCallsInFlight: 2 });
    sb.defineAsyncFunction("h", async ([i]) => i);
    expect(await sb.eval("let s = 0; for (let i = 0; i < 500; i++) s += await h(1); s")).toBe(500);
  });

  it("a legitimate fan-out of a few thousand calls fits the defaults", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("h", async ([i]) => i);
    expect(await sb.eval("(await Promise.all(Array.from({ length: 5000 }, (_, i) => h(i)))).length")).toBe(5000);
  });
});

describe("the host-side state of calls in flight counts against copyLimitBytes", () => {
  it("unawaited calls under a small copy limit end with COPY_LIMIT, naming the calls in flight", async () => {
    const host = slowHost(60_000);
    const sb = sandbox({ copyLimitBytes: 64 * 1024 });
    sb.defineAsyncFunction("h", host.fn);
    const report = await sb.run("for (let i = 0; i < 1000; i++) h(i)");
    expect(report.ok ? "ok" : report.error.code).toBe("COPY_LIMIT");
    expect(report.ok ? "" : report.error.message).toContain("calls in flight");
    expect(host.calls()).toBeLessThan(64);
  });

  it("the same calls awaited one at a time fit, since each gives its state back", async () => {
    const sb = sandbox({ copyLimitBytes: 64 * 1024 });
    sb.defineAsyncFunction("h", async () => 1);
    expect(await sb.eval("let s = 0; for (let i = 0; i < 1000; i++) s += await h(i); s")).toBe(1000);
  });
});

describe("maxHostCallsInFlight is validated", () => {
  it("accepts an integer from 1 to 1,000,000 and reports it in the options in force", () => {
    expect(sandbox({ maxHostCallsInFlight: 1 }).options.maxHostCallsInFlight).toBe(1);
    expect(sandbox().options.maxHostCallsInFlight).toBe(SANDBOX_DEFAULTS.maxHostCallsInFlight);
  });

  it.each([0, -1, 1.5, "10", 2_000_000])("refuses %j with INVALID_ARGUMENT", (value) => {
    expect(() => sandbox({ maxHostCallsInFlight: value as number })).toThrow(
      expect.objectContaining({ code: "INVALID_ARGUMENT" }),
    );
  });
});
