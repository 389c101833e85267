// Hazard: the addon holds a handle's dispatchers weakly (src/native.ts); a Sandbox must keep them
// reachable itself, or a full garbage collection between two evals would silently cut its host
// functions off (sync calls failing as "shutting down", async calls never answered).
import { describe, expect, it } from "vitest";
import { sandbox } from "../hostile/harness.js";

const gc = (globalThis as { gc?: () => void }).gc;

describe("a live sandbox's host functions after a full garbage collection", () => {
  it("runs with a collectable heap (--expose-gc)", () => {
    expect(typeof gc).toBe("function");
  });

  it("still answers sync, primitive and async host calls, inline and off-thread", async () => {
    const sb = sandbox();
    sb.defineFunction("twice", (n) => (n as number) * 2);
    sb.defineFunction("wrap", (v) => ({ v }));
    sb.defineAsyncFunction("later", async ([n]) => (n as number) + 1);
    for (let i = 0; i < 3; i++) gc?.();
    await new Promise((r) => setImmediate(r));
    gc?.();
    expect(sb.evalSync("[twice(21), wrap([1]).v[0]]")).toEqual([42, 1]);
    expect(await sb.eval("[twice(4), wrap('x').v, await later(9)]")).toEqual([8, "x", 10]);
  });
});
