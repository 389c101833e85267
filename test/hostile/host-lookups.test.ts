/**
 * Lookups the host makes after an eval (hint rules ask for the sandbox's global names) must not run
 * guest code or guest-replaceable built-ins on the Node main thread, and must stay bounded when the
 * guest defines hundreds of thousands of globals.
 */
import { describe, expect, it } from "vitest";
import { sandbox } from "./harness.js";

describe("Sandbox.globalNames", () => {
  it("lists built-ins and user globals in creation order", () => {
    const sb = sandbox();
    sb.evalSync("var answer = 42; globalThis.later = 1");
    const names = sb.globalNames();
    expect(names).toContain("JSON");
    expect(names.indexOf("answer")).toBeGreaterThanOrEqual(0);
    expect(names.indexOf("later")).toBeGreaterThan(names.indexOf("answer"));
  });

  it("never calls a replaced Object.getOwnPropertyNames, Array.prototype.slice or a getter on globalThis", () => {
    const sb = sandbox();
    sb.evalSync(`
      globalThis.calls = 0;
      const spin = () => { calls++; for (;;) {} };
      Object.getOwnPropertyNames = spin; Reflect.ownKeys = spin; Object.keys = spin; Array.prototype.slice = spin;
      Object.defineProperty(globalThis, "trap", { get: spin, enumerable: true, configurable: true }); 0
    `);
    const names = sb.globalNames();
    expect(names).toContain("trap");
    expect(sb.getGlobal("calls")).toBe(0);
  });

  it("stops at the limit however many globals the guest defined", () => {
    const sb = sandbox();
    sb.evalSync("for (let i = 0; i < 200000; i++) globalThis['g' + i] = i");
    expect(sb.globalNames(5000)).toHaveLength(5000);
    expect(sb.globalNames(0)).toEqual([]);
  });

  it("is refused while an eval runs, and for a bad limit", async () => {
    const sb = sandbox();
    let busy: unknown;
    sb.defineAsyncFunction("look", () => {
      try {
        sb.globalNames();
      } catch (err) {
        busy = err;
      }
      return 1;
    });
    await sb.eval("await look()");
    expect(busy).toMatchObject({ code: "BUSY" });
    expect(() => sb.globalNames(-1)).toThrow(expect.objectContaining({ code: "INVALID_ARGUMENT" }));
  });
});
