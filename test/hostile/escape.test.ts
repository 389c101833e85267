/**
 * Guest code looking for a way out: host globals, module loading, host function internals,
 * shared references, and values that come back to the host.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GuestOpaque, Sandbox, SandboxError } from "../../src/index.js";

let sb: Sandbox;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(() => sb.dispose());

describe("the guest sees no host capability", () => {
  it.each([
    "require",
    "process",
    "module",
    "exports",
    "Buffer",
    "global",
    "fetch",
    "XMLHttpRequest",
    "WebSocket",
    "setTimeout",
    "setInterval",
    "setImmediate",
    "std",
    "os",
    "scriptArgs",
    "Deno",
    "Bun",
    "WebAssembly",
    "SharedArrayBuffer",
    "Atomics",
    "Worker",
    "navigator",
  ])("has no `%s`", (name) => {
    expect(sb.evalSync(`typeof globalThis[${JSON.stringify(name)}]`)).toBe("undefined");
  });

  it("cannot load modules with dynamic import", async () => {
    const err = await sb.eval("await import('node:fs')").catch((e: SandboxError) => e);
    expect(err).toBeInstanceOf(SandboxError);
    expect((err as SandboxError).code).toBe("GUEST_ERROR");
    const relative = await sb.eval("await import('./package.json')").catch((e: SandboxError) => e);
    expect((relative as SandboxError).code).toBe("GUEST_ERROR");
  });

  it("finds no host object through the constructor chain of a host function", () => {
    sb.defineFunction("tools.lookup", () => 1);
    expect(sb.evalSync("tools.lookup.constructor('return typeof process + typeof require')()")).toBe(
      "undefinedundefined",
    );
    expect(
      sb.evalSync(
        "tools.lookup.constructor === Function && Object.getPrototypeOf(tools.lookup) === Function.prototype",
      ),
    ).toBe(true);
  });

  it("does not reveal a host function's source", () => {
    sb.defineFunction("secretTool", () => {
      const apiKey = "sk-live-0123456789";
      return apiKey.length;
    });
    const source = sb.evalSync("String(secretTool)") as string;
    expect(source).not.toContain("sk-live");
    expect(source).not.toContain("apiKey");
    expect(sb.evalSync("secretTool()")).toBe(18);
  });

  it("does not reveal host paths in errors from host functions", () => {
    sb.defineFunction("explode", () => {
      throw new Error("boom");
    });
    const stack = sb.evalSync("try { explode() } catch (e) { String(e.stack) + Object.keys(e).join() }") as string;
    expect(stack).not.toMatch(/node_modules|\/work\/|file:|node:internal|\.ts:/);
  });

  it("cannot reach another sandbox's globals", () => {
    const other = new Sandbox();
    try {
      other.evalSync("globalThis.secret = 'other'");
      expect(sb.evalSync("typeof secret")).toBe("undefined");
      sb.evalSync("globalThis.secret = 'mine'; Object.prototype.polluted = 1");
      expect(other.evalSync("[secret, ({}).polluted]")).toEqual(["other", undefined]);
    } finally {
      other.dispose();
    }
  });
});

describe("values cross by copy, never by reference", () => {
  it("keeps a host object unchanged when the guest mutates its copy", () => {
    const config = { limits: { n: 1 }, list: [1] };
    sb.setGlobal("config", config);
    sb.evalSync("config.limits.n = 999; config.list.push(2); config.injected = true");
    expect(config).toEqual({ limits: { n: 1 }, list: [1] });
  });

  it("keeps a host function's arguments private to that call", () => {
    const seen: unknown[] = [];
    sb.defineFunction("collect", (x) => {
      seen.push(x);
      (x as { n: number }).n = -1; // host mutation must not reach the guest
    });
    expect(sb.evalSync("const arg = { n: 1 }; collect(arg); arg.n")).toBe(1);
    expect(seen).toEqual([{ n: -1 }]);
  });

  it("hands out a fresh copy on every read", () => {
    sb.evalSync("globalThis.shared = { n: 1 }");
    const a = sb.getGlobal("shared") as { n: number };
    const b = sb.getGlobal("shared") as { n: number };
    expect(a).not.toBe(b);
    a.n = 2;
    expect(sb.evalSync("shared.n")).toBe(1);
  });

  it("does not run a getter when the host reads a global", () => {
    sb.evalSync(
      "globalThis.reads = 0; Object.defineProperty(globalThis, 'trapped', { get() { reads++; while (true) {} }, configurable: true })",
    );
    let outcome: unknown;
    try {
      outcome = sb.getGlobal("trapped");
    } catch (err) {
      outcome = (err as SandboxError).code;
    }
    expect(outcome === undefined || outcome === "UNSERIALIZABLE").toBe(true);
    expect(sb.evalSync("reads")).toBe(0);
  });

  it("refuses to send a GuestOpaque description back into a sandbox", () => {
    const described = sb.evalSync("(function f() {})", { unserializable: "describe" });
    expect(described).toBeInstanceOf(GuestOpaque);
    let code: string | undefined;
    try {
      sb.setGlobal("back", described);
    } catch (err) {
      code = (err as SandboxError).code;
    }
    expect(code).toBe("UNSERIALIZABLE");
  });

  it("gives host code plain data only, with no guest-controlled prototype", () => {
    const v = sb.evalSync(
      "class Evil { constructor() { this.x = 1; } toString() { return 'evil'; } }; new Evil()",
    ) as object;
    expect(Object.getPrototypeOf(v) === Object.prototype || Object.getPrototypeOf(v) === null).toBe(true);
    expect(String(v)).not.toBe("evil");
  });
});
