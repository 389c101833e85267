/**
 * The Sandbox primitives the agent layer builds on instead of running JavaScript strings of its
 * own: a frozen global host service (`task()`), removing a global or a namespace entry
 * (`tools.*`), listing global names.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { Sandbox } from "../../src/index.js";
import { FROZEN_SERVICE_SHAPE, frozenServiceShape, syncCodeOf } from "../hostile/harness.js";

let sb: Sandbox;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(() => sb.dispose());

describe("defineFrozenAsyncFunction", () => {
  it("gives the guest a frozen, read-only, non-configurable function that answers through the host", async () => {
    const seen: unknown[][] = [];
    expect(
      sb.defineFrozenAsyncFunction("service", async (args) => {
        seen.push(args);
        return { echoed: args[0] };
      }),
    ).toBe(true);
    expect(await frozenServiceShape(sb)).toEqual(FROZEN_SERVICE_SHAPE);
    expect(
      sb.evalSync(`try { Object.defineProperty(globalThis, "service", { value: 1 }); "allowed" } catch (e) { e.name }`),
    ).toBe("TypeError");
    expect(seen).toEqual([[{ q: 1 }]]);
  });

  it("leaves no other new global behind (the host function it captured is unreachable)", () => {
    const before = new Set(sb.globalNames());
    sb.defineFrozenAsyncFunction("service", async () => 1);
    expect(sb.globalNames().filter((n) => !before.has(n))).toEqual(["service"]);
  });

  it("keeps the guest's own non-configurable global of that name and says so", async () => {
    await sb.eval("var service = 'mine'");
    expect(sb.defineFrozenAsyncFunction("service", async () => "host")).toBe(false);
    expect(await sb.eval("service")).toBe("mine");
  });

  it("replaces a configurable global the guest assigned", async () => {
    await sb.eval("globalThis.service = 'mine'");
    expect(sb.defineFrozenAsyncFunction("service", async () => "host")).toBe(true);
    expect(await sb.eval("await service()")).toBe("host");
  });

  it("is left out of snapshots, like every host function", async () => {
    sb.defineFrozenAsyncFunction("service", async () => 1);
    await sb.eval("var kept = 1");
    const { sandbox, notRestored } = await Sandbox.restoreAsync(await sb.snapshotAsync());
    try {
      expect(notRestored).toEqual([]);
      expect(sandbox.evalSync("[typeof service, kept]")).toEqual(["undefined", 1]);
    } finally {
      sandbox.dispose();
    }
  });

  it("refuses names that are not identifiers and a disposed sandbox, with typed errors", () => {
    expect(syncCodeOf(() => sb.defineFrozenAsyncFunction("a.b", async () => 1))).toBe("INVALID_ARGUMENT");
    expect(syncCodeOf(() => sb.defineFrozenAsyncFunction("__proto__", async () => 1))).toBe("INVALID_ARGUMENT");
    expect(syncCodeOf(() => sb.defineFrozenAsyncFunction("if", async () => 1))).toBe("INVALID_ARGUMENT");
    expect(syncCodeOf(() => sb.defineFrozenAsyncFunction("ok", 5 as never))).toBe("INVALID_ARGUMENT");
    sb.dispose();
    expect(syncCodeOf(() => sb.defineFrozenAsyncFunction("ok", async () => 1))).toBe("DISPOSED");
  });

  it("refuses with BUSY while an eval is queued", async () => {
    sb.defineAsyncFunction("wait", () => new Promise((resolve) => setTimeout(resolve, 20)));
    const running = sb.eval("await wait()");
    expect(syncCodeOf(() => sb.defineFrozenAsyncFunction("service", async () => 1))).toBe("BUSY");
    await running;
    expect(await sb.eval("typeof service")).toBe("undefined");
  });
});

describe("removeGlobal", () => {
  it("deletes one entry of a namespace of host functions and keeps its siblings", async () => {
    sb.defineAsyncFunction("tools.a", async () => "a");
    sb.defineAsyncFunction("tools.b", async () => "b");
    expect(await sb.removeGlobal("tools.a")).toBe(true);
    expect(await sb.eval("[Object.keys(tools), await tools.b()]")).toEqual([["b"], "b"]);
  });

  it("deletes a top-level global, and resolves true for one that never existed", async () => {
    await sb.eval("globalThis.x = 1");
    expect(await sb.removeGlobal("x")).toBe(true);
    expect(await sb.eval("typeof x")).toBe("undefined");
    expect(await sb.removeGlobal("never.defined")).toBe(true);
  });

  it("resolves false when the guest made the entry undeletable", async () => {
    sb.defineAsyncFunction("tools.a", async () => "a");
    await sb.eval("Object.freeze(tools); var top = 1; undefined");
    expect(await sb.removeGlobal("tools.a")).toBe(false);
    expect(await sb.removeGlobal("top")).toBe(false);
    expect(await sb.eval("[typeof tools.a, top]")).toEqual(["function", 1]);
  });

  it("stops a Proxy trap that spins within its short budget, off the main thread", async () => {
    await sb.eval("globalThis.tools = new Proxy({}, { deleteProperty() { for (;;) {} } }); undefined");
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    try {
      expect(await sb.removeGlobal("tools.a")).toBe(false);
    } finally {
      clearInterval(timer);
    }
    // The event loop turned while the trap spun: the delete ran on an executor thread.
    expect(ticks).toBeGreaterThan(0);
    expect(await sb.eval("1 + 1")).toBe(2);
  });

  it("refuses paths that are not dotted identifiers, and a disposed sandbox", async () => {
    await expect(sb.removeGlobal("a..b")).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    await expect(sb.removeGlobal("a.__proto__")).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    sb.dispose();
    await expect(sb.removeGlobal("a")).rejects.toMatchObject({ code: "DISPOSED" });
  });
});
