// Hazard: a realm richer than a sandbox needs. Shared memory, GC-observing objects and engine
// hooks that run guest code at moments the host chose are removed (native/realm.cc); what
// remains reaches only the sandbox's own global.
import { describe, expect, it } from "vitest";
import { bystander, expectHostResponsive, sandbox } from "./harness.js";

describe("removed from the realm", () => {
  it.each(["Atomics", "SharedArrayBuffer", "WeakRef", "FinalizationRegistry"])("has no %s, by any name", (name) => {
    const sb = sandbox();
    expect(sb.evalSync(`typeof ${name}`)).toBe("undefined");
    expect(sb.evalSync(`Object.getOwnPropertyNames(globalThis).includes(${JSON.stringify(name)})`)).toBe(false);
    expect(sb.evalSync(`Reflect.ownKeys(globalThis).some((k) => String(k).includes(${JSON.stringify(name)}))`)).toBe(
      false,
    );
  });

  it("has no Error.prepareStackTrace hook: a guest-set one is an inert property", () => {
    const sb = sandbox();
    const result = sb.evalSync(`
      globalThis.hookCalls = 0;
      Error.prepareStackTrace = () => { hookCalls++; return "hijacked"; };
      const e = new Error("x");
      [typeof e.stack, e.stack === "hijacked", hookCalls]
    `);
    expect(result).toEqual(["string", false, 0]);
  });

  it("does not run guest code when the host copies an Error in (setGlobal stays instant)", async () => {
    const sb = sandbox({ executionTimeoutMs: 200 });
    sb.evalSync("globalThis.hookCalls = 0; Error.prepareStackTrace = () => { hookCalls++; while (true) {} }; 0");
    sb.setGlobal("hostError", new TypeError("from the host"));
    expect(sb.evalSync("[hostError instanceof TypeError, hostError.message, hookCalls]")).toEqual([
      true,
      "from the host",
      0,
    ]);
    await expectHostResponsive();
  });

  it("keeps engine-built errors inside the execution budget (an eval that can never settle)", async () => {
    const sb = sandbox({ executionTimeoutMs: 200, wallTimeoutMs: 5000 });
    const report = await sb.run("Error.prepareStackTrace = () => { while (true) {} }; await new Promise(() => {})");
    expect(report.ok).toBe(false);
    if (!report.ok) expect(report.error.code).toBe("GUEST_ERROR");
    // The guest's CPU time (the wall time of a loaded machine says nothing about where it ran).
    expect(report.stats.executionMs).toBeLessThan(2000);
  });
});

describe("kept in the realm", () => {
  it("keeps DisposableStack and `using` (pure bookkeeping, no GC or thread interaction)", () => {
    const sb = sandbox();
    expect(
      sb.evalSync(`
        const log = [];
        { using a = { [Symbol.dispose]() { log.push("a"); } }; const s = new DisposableStack(); s.defer(() => log.push("s")); s.dispose(); }
        log
      `),
    ).toEqual(["s", "a"]);
  });

  it("keeps WeakMap and WeakSet (they expose no collection timing)", () => {
    const sb = sandbox();
    expect(sb.evalSync("const k = {}; const m = new WeakMap([[k, 1]]); [m.get(k), new WeakSet([k]).has(k)]")).toEqual([
      1,
      true,
    ]);
  });
});

describe("Function and eval reach only the sandbox's own global", () => {
  const ROUTES = {
    "Function('return this')()": "Function('return this')()",
    "constructor.constructor": "({}).constructor.constructor('return this')()",
    "indirect eval": "(0, eval)('this')",
    "async function constructor": "await Object.getPrototypeOf(async function () {}).constructor('return this')()",
    "generator function constructor": "Object.getPrototypeOf(function* () {}).constructor('yield this')().next().value",
  };

  it.each(Object.entries(ROUTES))("%s is the sandbox global, holding no host capability", async (_name, route) => {
    const sb = sandbox();
    sb.evalSync("globalThis.sandboxMark = 'mine'");
    const probe = `
      const g = ${route};
      [g === globalThis, g.sandboxMark, typeof g.process, typeof g.require, typeof g.fetch, typeof g.Buffer]
    `;
    expect(await sb.eval(probe)).toEqual([true, "mine", "undefined", "undefined", "undefined", "undefined"]);
  });

  it("gives each sandbox its own Function: globals created through it stay in that sandbox", async () => {
    const other = bystander();
    const sb = sandbox();
    sb.evalSync("Function('globalThis.leaked = 1; globalThis.marker = null')(); (0, eval)('var viaEval = 2')");
    expect(sb.evalSync("[leaked, viaEval, marker]")).toEqual([1, 2, null]);
    expect(other.sb.evalSync("[typeof leaked, typeof viaEval]")).toEqual(["undefined", "undefined"]);
    expect((globalThis as Record<string, unknown>).leaked).toBeUndefined();
    await other.check();
  });
});

describe("prototype pollution stays inside", () => {
  it("does not reach host objects or values copied out", async () => {
    const sb = sandbox();
    const out = sb.evalSync(`
      Object.prototype.polluted = "yes";
      Array.prototype.extra = () => "x";
      Object.defineProperty(Object.prototype, "toJSON", { value: () => "hijacked", enumerable: false });
      ({ a: [1, 2], b: { c: 3 } })
    `) as { a: number[]; b: { c: number } };
    expect(out).toEqual({ a: [1, 2], b: { c: 3 } });
    expect(Object.getPrototypeOf(out)).toBe(Object.prototype);
    expect(({} as Record<string, unknown>).polluted).toBeUndefined();
    expect((out as unknown as Record<string, unknown>).polluted).toBeUndefined();
    expect(Object.hasOwn(Array.prototype, "extra")).toBe(false);
    expect(JSON.stringify(out)).toBe('{"a":[1,2],"b":{"c":3}}');
    await expectHostResponsive();
  });

  it("does not leak into a fresh sandbox", () => {
    const a = sandbox();
    a.evalSync("Object.prototype.polluted = 1; Array.prototype.push = null; 0");
    const b = sandbox();
    expect(b.evalSync("[({}).polluted, typeof [].push]")).toEqual([undefined, "function"]);
  });

  it("cannot install a __proto__ on a value the host sends in", () => {
    const sb = sandbox();
    sb.setGlobal("input", JSON.parse('{"__proto__": {"admin": true}, "name": "x"}'));
    expect(
      sb.evalSync("[input.admin, Object.getPrototypeOf(input) === Object.prototype, Object.keys(input).sort().join()]"),
    ).toEqual([undefined, true, "__proto__,name"]);
    expect(sb.evalSync("({}).admin")).toBeUndefined();
  });
});
