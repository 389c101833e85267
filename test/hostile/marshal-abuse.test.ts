// Hazard: values built to hurt the copier when they cross the boundary: code hooks it must never
// run (getters, Proxy traps, toJSON, Symbol.toPrimitive, species), and shapes that explode
// its time or memory (a million keys, sparse arrays of length 2^32 - 1, deep nesting, huge
// buffers, shared-reference blow-ups). Each copy ends in a value or a typed error, fast.
import { describe, expect, it } from "vitest";
import { GuestOpaque } from "../../src/index.js";
import { bystander, codeOf, expectHostResponsive, expectMemoryBack, sandbox, cpuTimed } from "./harness.js";

const HOOKS = {
  "a getter deep inside": "({ a: [{ b: { get c() { hits++; return 1; } } }] })",
  "a Proxy deep inside":
    "({ a: [1, new Proxy({}, { get() { hits++; }, ownKeys() { hits++; return []; }, getPrototypeOf() { hits++; return null; } })] })",
  "a toJSON method": "({ v: 1, toJSON() { hits++; return 'replaced'; } })",
  "Symbol.toPrimitive and valueOf":
    "({ [Symbol.toPrimitive]() { hits++; return 1; }, valueOf() { hits++; return 2; } })",
  "an Array with a Proxy prototype":
    "Object.setPrototypeOf([1, 2], new Proxy([], { get() { hits++; return 1; }, has() { hits++; return true; } }))",
  "an Array subclass with a species":
    "(() => { class A extends Array { static get [Symbol.species]() { hits++; return Array; } } return A.from([1, 2]); })()",
  "a Map whose entries are accessors on its prototype":
    "(() => { const m = new Map([[1, 2]]); Object.defineProperty(Map.prototype, 'size', { get() { hits++; return 9; } }); return m; })()",
  "an Error with accessor name and message":
    "(() => { const e = new Error('m'); Object.defineProperty(e, 'message', { get() { hits++; return 'x'; } }); Object.defineProperty(e, 'name', { get() { hits++; return 'y'; } }); return e; })()",
};

describe("copying out never runs guest code", () => {
  it.each(Object.entries(HOOKS))("%s: copied or refused, never run", async (_name, expr) => {
    const sb = sandbox();
    sb.evalSync("globalThis.hits = 0");
    for (const describeMode of [false, true]) {
      const report = sb.runSync(expr, describeMode ? { unserializable: "describe" } : undefined);
      if (!report.ok) expect(report.error.code).toBe("UNSERIALIZABLE");
      const asyncReport = await sb.run(expr, describeMode ? { unserializable: "describe" } : undefined);
      expect(asyncReport.ok).toBe(report.ok);
    }
    expect(sb.evalSync("hits")).toBe(0);
  });

  it("describes a Proxy as a GuestOpaque placeholder instead of following it", () => {
    const sb = sandbox();
    const value = sb.evalSync("[1, new Proxy({ secret: 1 }, {})]", { unserializable: "describe" }) as unknown[];
    expect(value[0]).toBe(1);
    expect(value[1]).toBeInstanceOf(GuestOpaque);
    expect((value[1] as GuestOpaque).kind).toBe("proxy");
  });
});

describe("shapes that explode time or memory", () => {
  it("copies an object with 200,000 keys out in reasonable time", async () => {
    const sb = sandbox({ memoryLimitBytes: 256 * 1024 * 1024, executionTimeoutMs: 30_000 });
    sb.evalSync("globalThis.wide = {}; for (let i = 0; i < 200000; i++) wide['k' + i] = i;");
    const [value, ms] = await cpuTimed(() => sb.eval("wide"));
    expect(Object.keys(value as object).length).toBe(200000);
    expect((value as Record<string, number>).k199999).toBe(199999);
    expect(ms).toBeLessThan(10_000);
    await expectHostResponsive();
  });

  it("copies a sparse array of length 2^32 - 1 out with its one element, without allocating its length", async () => {
    const sb = sandbox();
    const rssBefore = process.memoryUsage().rss;
    const value = (await sb.eval(
      "const s = []; s.length = 2 ** 32 - 1; s[7] = 'x'; s[2 ** 32 - 2] = 'last'; s",
    )) as string[];
    expect(value.length).toBe(2 ** 32 - 1);
    expect(value[7]).toBe("x");
    expect(value[2 ** 32 - 2]).toBe("last");
    expect(Object.keys(value)).toEqual(["7", "4294967294"]);
    expect(process.memoryUsage().rss - rssBefore).toBeLessThan(64 * 1024 * 1024);
  });

  it("copies a sparse array of length 2^32 - 1 in without allocating its length", () => {
    const sb = sandbox();
    const sparse: string[] = [];
    sparse.length = 2 ** 32 - 1;
    sparse[3] = "in";
    sb.setGlobal("sparse", sparse);
    expect(sb.evalSync("[sparse.length, sparse[3], Object.keys(sparse).length]")).toEqual([2 ** 32 - 1, "in", 1]);
  });

  it("refuses a result nested 100,000 levels deep with a typed error, fast, in both directions", async () => {
    const other = bystander();
    const sb = sandbox();
    const baseline = sb.memoryUsage().usedBytes;
    const [code, ms] = await cpuTimed(() =>
      codeOf(() => sb.eval("{ let d = {}; for (let i = 0; i < 100000; i++) d = { d }; d }")),
    );
    expect(code).toBe("UNSERIALIZABLE");
    expect(ms).toBeLessThan(5000);
    let deep: unknown = {};
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(await codeOf(() => sb.setGlobal("deep", deep))).not.toBe("no error");
    expect(sb.evalSync("typeof deep")).toBe("undefined");
    expectMemoryBack(sb, baseline, 2 * 1024 * 1024);
    await other.check();
  });

  it("copies a 2^20-fold shared-reference DAG by reference, not by expansion", async () => {
    const sb = sandbox();
    let node = (await sb.eval("let n = [1]; for (let i = 0; i < 20; i++) n = [n, n]; n")) as unknown[];
    for (let i = 0; i < 20; i++) {
      expect(node[0]).toBe(node[1]);
      node = node[0] as unknown[];
    }
    expect(node).toEqual([1]);
  });

  it("copies a 32 MiB typed array out and gives the guest memory back", async () => {
    const sb = sandbox({ memoryLimitBytes: 128 * 1024 * 1024 });
    const baseline = sb.memoryUsage().usedBytes;
    const value = (await sb.eval(
      "{ const t = new Uint8Array(32 * 1024 * 1024); t[t.length - 1] = 7; t }",
    )) as Uint8Array;
    expect(value.length).toBe(32 * 1024 * 1024);
    expect(value[value.length - 1]).toBe(7);
    expectMemoryBack(sb, baseline, 2 * 1024 * 1024);
  });

  it("copies typed-array views sharing one buffer as views of one buffer when that buffer is copied too", async () => {
    const sb = sandbox();
    const [buf, a, b] = (await sb.eval(
      "const buf = new ArrayBuffer(8); [buf, new Uint8Array(buf, 0, 4), new Uint32Array(buf, 4, 1)]",
    )) as [ArrayBuffer, Uint8Array, Uint32Array];
    expect(a.buffer).toBe(buf);
    expect(b.buffer).toBe(buf);
    expect([a.byteOffset, b.byteOffset, a.buffer.byteLength]).toEqual([0, 4, 8]);
  });
});
