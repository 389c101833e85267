// Hazard: freeing a runtime walks every object its guest made (0.1–1 s for a few hundred MB). On
// the Node main thread, disposing (or collecting) one big session would stall every other one, so
// big heaps are freed on the addon's reaper thread (native/reaper.h). These tests hold it to
// freeing all of it, from dispose() and from garbage collection, while other sessions go on.
import { describe, expect, it } from "vitest";
import { native } from "../../src/native.js";
import { Sandbox } from "../../src/index.js";

const MiB = 1024 * 1024;
const gc = (globalThis as { gc?: () => void }).gc;
const FILL = "globalThis.big = []; for (let i = 0; i < 200000; i++) big.push({ i, s: 'x' + i }); 0";

function bigSandbox(): Sandbox {
  const sb = new Sandbox({ memoryLimitBytes: 256 * MiB });
  sb.evalSync(FILL, { timeoutMs: 120_000 });
  expect(sb.memoryUsage().usedBytes).toBeGreaterThan(16 * MiB);
  return sb;
}

/** Waits (turning the event loop) until the reaper has freed every runtime handed to it; the bytes it freed. */
async function reaped(): Promise<number> {
  for (let i = 0; i < 6000 && native.reaperBytes()[0] > 0; i++) await new Promise((r) => setTimeout(r, 10));
  expect(native.reaperBytes()[0]).toBe(0);
  return native.reaperBytes()[1];
}

describe("disposing a session with a large heap", () => {
  it("frees all of it, and a burst of them, while another session keeps evaluating", async () => {
    const other = new Sandbox();
    other.evalSync("globalThis.n = 0");
    const freedBefore = await reaped();
    const big = [bigSandbox(), bigSandbox(), bigSandbox()];
    const used = big.reduce((sum, sb) => sum + sb.memoryUsage().usedBytes, 0);
    for (const sb of big) {
      sb.dispose();
      expect(sb.disposed).toBe(true);
      expect(other.evalSync("++n")).toBeGreaterThan(0);
    }
    expect(await other.eval("n * 2")).toBe(6);
    expect(await reaped()).toBeGreaterThanOrEqual(freedBefore + used);
    expect(() => big[0]!.evalSync("1")).toThrow(expect.objectContaining({ code: "DISPOSED" }));
    other.dispose();
  }, 300_000);

  it("frees a forgotten one when it is garbage collected", async () => {
    expect(typeof gc).toBe("function");
    const freedBefore = await reaped();
    const used = (() => bigSandbox().memoryUsage().usedBytes)(); // never disposed: only collection frees it
    for (let i = 0; i < 4; i++) {
      gc?.();
      await new Promise((r) => setImmediate(r));
    }
    expect(await reaped()).toBeGreaterThanOrEqual(freedBefore + used);
  }, 300_000);

  // Trimming walks the whole C heap under the allocator's locks and the pages it returns fault in
  // again: after every freed session it made a loop of snapshot, restore and dispose of a 1 MB
  // state 8% slower while the reaper trimmed beside it.
  it("hands freed pages back once per 64 MiB of freed sessions, not after each one", async () => {
    await reaped();
    const trimsBefore = native.heapTrims();
    for (let i = 0; i < 8; i++) {
      const sb = new Sandbox();
      sb.evalSync("globalThis.rows = []; for (let i = 0; i < 20000; i++) rows.push({ i, s: 'x' + i }); 0");
      expect(sb.memoryUsage().usedBytes).toBeGreaterThan(MiB); // freed by the reaper
      expect(sb.memoryUsage().usedBytes).toBeLessThan(4 * MiB);
      sb.dispose();
      await reaped();
    }
    // Under 32 MiB in all: one trim at most (what earlier tests freed may have been near 64 MiB).
    expect(native.heapTrims() - trimsBefore).toBeLessThanOrEqual(1);
    const trimsAfterSmall = native.heapTrims();
    for (let i = 0; i < 5; i++) {
      bigSandbox().dispose(); // over 16 MiB each
      await reaped();
    }
    expect(native.heapTrims()).toBeGreaterThan(trimsAfterSmall);
  }, 300_000);

  it("still frees a small one where it is disposed", async () => {
    const freedBefore = await reaped();
    const sb = new Sandbox();
    sb.evalSync("globalThis.x = [1, 2, 3]");
    sb.dispose();
    expect(native.reaperBytes()).toEqual([0, freedBefore]);
  });
});
