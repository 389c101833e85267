// A guest that awaits host calls in a loop has its next call taken by the main thread while it
// settles the previous one (EnvBridge::collectNextCall), not through the event loop's wake-up.
// What the host observes must not change: order, re-entry refusal, disposal, other sandboxes.
import { describe, expect, it } from "vitest";
import { isSandboxError } from "../../src/index.js";
import { sandbox } from "../hostile/harness.js";

const LOOP = "let s = 0; for (let i = 0; i < 2000; i++) { s += await host(i); } s";

describe("awaited host calls in a loop", () => {
  it("reach the host in the guest's order, interleaved with its console lines", async () => {
    const sb = sandbox();
    const seen: string[] = [];
    sb.defineAsyncFunction("host", async ([i]) => {
      seen.push(`call ${i}`);
      return 1;
    });
    const code = "let s = 0; for (let i = 0; i < 500; i++) { console.log('line ' + i); s += await host(i); } s";
    const value = await sb.eval(code, { onConsole: (entry) => seen.push(entry.text) });
    expect(value).toBe(500);
    expect(seen).toEqual(Array.from({ length: 500 }, (_, i) => [`line ${i}`, `call ${i}`]).flat());
  });

  it("answered without a promise, run one after another rather than nested in each other", async () => {
    const sb = sandbox();
    let deepest = 0;
    sb.defineAsyncFunction("host", () => {
      deepest = Math.max(deepest, new Error().stack!.split("\n").length);
      return 1;
    });
    const limit = Error.stackTraceLimit;
    Error.stackTraceLimit = 1000;
    try {
      expect(await sb.eval("let s = 0; for (let i = 0; i < 2000; i++) { s += await host(i); } s")).toBe(2000);
    } finally {
      Error.stackTraceLimit = limit;
    }
    expect(deepest).toBeLessThan(100); // each call nested in the one before would reach 1000 frames
  });

  it("still refuse a host function that evals in its own sandbox after an await", async () => {
    const sb = sandbox();
    let refusal: unknown;
    sb.defineAsyncFunction("host", async ([i]) => {
      if (i === 1500) {
        await Promise.resolve();
        refusal = await sb.eval("1").catch((err: unknown) => err);
      }
      return 1;
    });
    expect(await sb.eval(LOOP)).toBe(2000);
    expect(isSandboxError(refusal, "BUSY")).toBe(true);
  });

  it("let a host function evaluate in another sandbox between its calls", async () => {
    const sb = sandbox();
    const other = sandbox();
    let total = 0;
    sb.defineAsyncFunction("host", async ([i]) => {
      if ((i as number) % 100 === 0) total += (await other.eval(`${i} + 1`)) as number;
      return 1;
    });
    expect(await sb.eval(LOOP)).toBe(2000);
    expect(total).toBe(Array.from({ length: 20 }, (_, k) => k * 100 + 1).reduce((a, b) => a + b));
  });

  it("end the eval with DISPOSED when a host function disposes its sandbox mid-loop", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("host", async ([i]) => {
      if (i === 1000) sb.dispose();
      return 1;
    });
    const err = await sb.eval(LOOP).catch((e: unknown) => e);
    expect(isSandboxError(err, "DISPOSED")).toBe(true);
    expect(sb.disposed).toBe(true);
  });

  it("of two sandboxes at once both finish with their own sums", async () => {
    const a = sandbox();
    const b = sandbox();
    a.defineAsyncFunction("host", async ([i]) => (i as number) + 1);
    b.defineAsyncFunction("host", async ([i]) => (i as number) * 2);
    const [sumA, sumB] = await Promise.all([a.eval(LOOP), b.eval(LOOP)]);
    expect(sumA).toBe((2000 * 2001) / 2);
    expect(sumB).toBe(2000 * 1999);
  });
});
