import { afterEach, describe, expect, it } from "vitest";
import { Sandbox, SandboxError } from "../../src/index.js";

const live: Sandbox[] = [];
afterEach(() => {
  for (const sb of live.splice(0)) sb.dispose();
});

function sandbox(): Sandbox {
  const sb = new Sandbox();
  live.push(sb);
  return sb;
}

/** Runs `setup` in a fresh sandbox, snapshots it and restores the snapshot into another one. */
function carry(setup: string): { restored: Sandbox; notRestored: { name: string; type: string }[]; bytes: Uint8Array } {
  const sb = sandbox();
  sb.evalSync(`${setup}\n;undefined`);
  const bytes = sb.snapshot();
  const { sandbox: restored, notRestored } = Sandbox.restore(bytes);
  live.push(restored);
  return { restored, notRestored, bytes };
}

function thrown(fn: () => unknown): SandboxError {
  try {
    fn();
  } catch (err) {
    expect(err).toBeInstanceOf(SandboxError);
    return err as SandboxError;
  }
  throw new Error("expected a throw");
}

describe("every value class survives a snapshot", () => {
  it("keeps primitives exactly: BigInt, -0, NaN, Infinity, lone surrogates, NUL, long strings", () => {
    const { restored } = carry(`
      var big = -(10n ** 40n), negZero = -0, nan = NaN, inf = -Infinity, int = 2147483647, frac = 0.1;
      var lone = "a\\uD800b\\uDFFF", nul = "x\\u0000y", wide = "日本語 ✓", latin = "café", long = "ab".repeat(50000);
      var t = true, f = false, n = null, u = undefined;
    `);
    expect(restored.evalSync("big")).toBe(-(10n ** 40n));
    expect(Object.is(restored.evalSync("negZero"), -0)).toBe(true);
    expect(restored.evalSync("nan")).toBeNaN();
    expect(restored.evalSync("[inf, int, frac, t, f, n, u]")).toEqual([
      -Infinity,
      2147483647,
      0.1,
      true,
      false,
      null,
      undefined,
    ]);
    expect(restored.evalSync("lone")).toBe("a\uD800b\uDFFF");
    expect(restored.evalSync("[nul, wide, latin]")).toEqual(["x\u0000y", "日本語 ✓", "café"]);
    expect(restored.evalSync("long.length")).toBe(100000);
    expect(restored.evalSync("'u' in globalThis && u === undefined")).toBe(true);
  });

  // The writer used to read " 1", "+2" and "-0" as indices 1, 2 and 0 (strtoull), so the restored
  // array's elements were overwritten by the values of those named properties.
  it("keeps array elements when the array has named properties that read as numbers (-0, ' 1', '+2')", () => {
    const { restored } = carry(
      `var arr = [1, 2, 3]; arr["-0"] = "minus zero"; arr[" 1"] = "space"; arr["+2"] = "plus";`,
    );
    expect(restored.evalSync("arr")).toEqual([1, 2, 3]);
    expect(restored.evalSync("Object.keys(arr)")).toEqual(["0", "1", "2"]);
  });

  it("keeps sparse arrays, null-prototype objects, Date, RegExp, Map, Set, Error and typed arrays", () => {
    const { restored } = carry(`
      var sparse = [1, , 3]; sparse[9] = "end";
      var bare = Object.create(null); bare.k = 1;
      var when = new Date(Date.UTC(2024, 1, 29)), bad = new Date(NaN), re = /a(b+)c/gimsu, sticky = /x/y;
      var m = new Map([[1, "one"], ["k", { deep: [1] }], [2n, null]]), s = new Set([1, "1", 1n]);
      var errs = [new Error("e"), new TypeError("t"), new RangeError("r")];
      var buf = new ArrayBuffer(16); new Uint8Array(buf).set([1, 2, 3, 4]);
      var i16 = new Int16Array([-1, 2]), f64 = new Float64Array([0.5, -0]), big64 = new BigInt64Array([-5n]);
      var clamped = new Uint8ClampedArray([300, -5]);
    `);
    expect(restored.evalSync("[sparse.length, 1 in sparse, sparse[0], sparse[9]]")).toEqual([10, false, 1, "end"]);
    expect(restored.evalSync("Object.getPrototypeOf(bare) === null && bare.k === 1")).toBe(true);
    expect(restored.evalSync("[when.toISOString(), isNaN(bad.getTime())]")).toEqual(["2024-02-29T00:00:00.000Z", true]);
    expect(restored.evalSync("[re.source, re.flags, re.test('xabbc'), sticky.flags]")).toEqual([
      "a(b+)c",
      "gimsu",
      true,
      "y",
    ]);
    expect(restored.evalSync("[m instanceof Map, m.get(1), m.get('k').deep[0], m.get(2n), m.size]")).toEqual([
      true,
      "one",
      1,
      null,
      3,
    ]);
    expect(restored.evalSync("[s instanceof Set, s.has('1'), s.has(1n), s.size]")).toEqual([true, true, true, 3]);
    expect(restored.evalSync("errs.map(e => [e instanceof Error, e.name, e.message])")).toEqual([
      [true, "Error", "e"],
      [true, "TypeError", "t"],
      [true, "RangeError", "r"],
    ]);
    expect(restored.evalSync("errs[1] instanceof TypeError")).toBe(true);
    expect(restored.evalSync("[...new Uint8Array(buf)].slice(0, 5)")).toEqual([1, 2, 3, 4, 0]);
    expect(restored.evalSync("[[...i16], [...f64], [...big64], [...clamped]]")).toEqual([
      [-1, 2],
      [0.5, -0],
      [-5n],
      [255, 0],
    ]);
  });
});

describe("identity and cycles", () => {
  it("keeps a self-reference and references shared between globals", () => {
    const { restored } = carry(`
      var a = { name: "a" }; a.self = a;
      let shared = { n: 1 }; const holder = { one: shared, two: [shared] };
      var m = new Map(); m.set(m, a); var s = new Set([a, shared]);
    `);
    expect(restored.evalSync("a.self === a")).toBe(true);
    expect(restored.evalSync("holder.one === shared && holder.two[0] === shared")).toBe(true);
    expect(restored.evalSync("m.get(m) === a && s.has(a) && s.has(shared)")).toBe(true);
    restored.evalSync("shared.n = 5");
    expect(restored.evalSync("holder.two[0].n")).toBe(5);
  });

  it("keeps two views over one buffer on one buffer", () => {
    const { restored } = carry(
      "var buf = new ArrayBuffer(8); var bytes = new Uint8Array(buf), words = new Uint32Array(buf, 4, 1);",
    );
    expect(restored.evalSync("bytes.buffer === words.buffer && words.buffer === buf")).toBe(true);
    expect(restored.evalSync("words[0] = 0x01020304; bytes[4]")).toBe(4);
  });
});

describe("bindings keep their kind", () => {
  it("restores let, const, var and function declarations with their semantics", () => {
    const { restored } = carry("let l = 1; const c = 2; var v = 3; function f() { return l + c + v }");
    expect(restored.evalSync("f()")).toBe(6);
    expect(restored.evalSync("l = 10; f()")).toBe(15);
    expect(thrown(() => restored.evalSync("c = 5")).message).toContain("read-only");
    expect(thrown(() => restored.evalSync("let c = 1")).guest?.message).toBe("redeclaration of 'c'");
    expect(
      restored.evalSync("[Object.getOwnPropertyDescriptor(globalThis, 'v').configurable, 'l' in globalThis]"),
    ).toEqual([false, false]);
    expect(restored.evalSync("var v = 4; v")).toBe(4);
  });

  it("stores only what the guest added: built-ins and host functions stay out, setGlobal values go in", () => {
    const sb = sandbox();
    sb.defineFunction("tools.search", (q: unknown) => `${String(q)}!`);
    sb.defineFunction("ask", () => 1);
    sb.setGlobal("config", { depth: 2 });
    sb.evalSync("var mine = tools.search('x')");
    const { sandbox: restored, notRestored } = Sandbox.restore(sb.snapshot());
    live.push(restored);
    expect(notRestored).toEqual([]);
    expect(
      restored.evalSync("[typeof tools, typeof ask, mine, config.depth, typeof JSON.parse, typeof console.log]"),
    ).toEqual(["undefined", "undefined", "x!", 2, "function", "function"]);
    restored.defineFunction("tools.search", (q: unknown) => `${String(q)}?`);
    expect(restored.evalSync("tools.search('y')")).toBe("y?");
  });

  it("tells built-ins from guest globals by name on every snapshot, even after the guest deleted and re-declared a built-in", () => {
    const sb = sandbox();
    sb.evalSync("globalThis.JSON2 = 1; var Jso = 2; var ñame = 3; var Map_ = 4");
    const first = Sandbox.restore(sb.snapshot()).sandbox;
    live.push(first);
    expect(first.evalSync("[JSON2, Jso, ñame, Map_, typeof JSON.parse]")).toEqual([1, 2, 3, 4, "function"]);
    // The name `Reflect` goes away and comes back: it is still a built-in's name, left out as before.
    sb.evalSync("delete globalThis.Reflect; delete globalThis.JSON2; var Reflect = 5; var Atomics2 = 6");
    const second = Sandbox.restore(sb.snapshot()).sandbox;
    live.push(second);
    expect(second.evalSync("[typeof Reflect, typeof JSON2, Jso, Atomics2]")).toEqual(["object", "undefined", 2, 6]);
  });

  it("an empty sandbox gives a small snapshot that restores to an empty sandbox", () => {
    const { bytes, restored, notRestored } = carry("1 + 1");
    expect(bytes.length).toBeLessThan(100);
    expect(notRestored).toEqual([]);
    expect(restored.evalSync("Object.keys(globalThis).filter(k => k !== 'console')")).toEqual([]);
  });
});

describe("functions, classes and instances", () => {
  it("re-creates top-level functions, arrows, generators, async functions and methods from their source", async () => {
    const { restored, notRestored } = carry(`
      function score(r) { return r.value * 2 }
      const double = (x) => x * 2;
      function* count(n) { for (let i = 0; i < n; i++) yield i }
      async function later(x) { await null; return x + 1 }
      var api = { get(x) { return x + "!" }, async load() { return 1 }, *ids() { yield 7 } };
      score.calls = 3;
    `);
    expect(notRestored).toEqual([]);
    expect(restored.evalSync("score({ value: 21 })")).toBe(42);
    expect(restored.evalSync("double(4)")).toBe(8);
    expect(restored.evalSync("[...count(3)]")).toEqual([0, 1, 2]);
    expect(await restored.eval("await later(1)")).toBe(2);
    expect(restored.evalSync("[api.get('a'), [...api.ids()][0], score.calls, score.name, score.length]")).toEqual([
      "a!",
      7,
      3,
      "score",
      1,
    ]);
  });

  it("re-creates classes and keeps instances' prototypes, methods, statics and subclasses", () => {
    const { restored, notRestored } = carry(`
      class Acc { static made = 0; constructor() { this.total = 0; Acc.made++ } add(x) { this.total += x; return this } get doubled() { return this.total * 2 } }
      class Named extends Acc { constructor(name) { super(); this.name = name } label() { return this.name + ":" + this.total } }
      const acc = new Acc(); acc.add(5);
      var list = [new Named("n1").add(1), new Named("n2")];
      function Point(x) { this.x = x } Point.prototype.norm = function () { return Math.abs(this.x) };
      var pt = new Point(-3);
      var protoOnly = Object.create({ greet() { return "hi " + this.who } }); protoOnly.who = "there";
    `);
    expect(notRestored).toEqual([]);
    expect(restored.evalSync("acc instanceof Acc && acc.add(1).total")).toBe(6);
    expect(restored.evalSync("acc.doubled")).toBe(12);
    expect(restored.evalSync("Acc.made")).toBe(3);
    expect(restored.evalSync("list[0] instanceof Named && list[0] instanceof Acc")).toBe(true);
    expect(restored.evalSync("list.map(n => n.label())")).toEqual(["n1:1", "n2:0"]);
    expect(restored.evalSync("Object.getPrototypeOf(list[0]) === Object.getPrototypeOf(list[1])")).toBe(true);
    expect(restored.evalSync("new Named('n3').add(2).label()")).toBe("n3:2");
    expect(restored.evalSync("pt.norm() + (pt instanceof Point ? 10 : 0)")).toBe(13);
    expect(restored.evalSync("protoOnly.greet()")).toBe("hi there");
  });

  it("re-creates getters and setters of object literals, arrays and globals", () => {
    const { restored, notRestored } = carry(`
      var stats = { values: [1, 2, 3], get mean() { return this.values.reduce((a, b) => a + b) / this.values.length }, set add(v) { this.values.push(v) } };
      Object.defineProperty(globalThis, "now", { get() { return stats.values.length }, configurable: true, enumerable: true });
      var list = [0]; Object.defineProperty(list, 1, { get() { return "second" }, enumerable: true, configurable: true });
    `);
    expect(notRestored).toEqual([]);
    expect(restored.evalSync("stats.mean")).toBe(2);
    expect(restored.evalSync("stats.add = 6; [stats.mean, now]")).toEqual([3, 4]);
    expect(restored.evalSync("[list.length, list[1]]")).toEqual([2, "second"]);
  });

  it("a class whose static initializer reads a later global still re-creates", () => {
    const { restored, notRestored } = carry(
      "var settings = { size: 3 }; class Box { static defaults = settings; size() { return Box.defaults.size } }",
    );
    expect(notRestored).toEqual([]);
    expect(restored.evalSync("new Box().size()")).toBe(3);
    expect(restored.evalSync("Box.defaults === settings")).toBe(true);
  });
});

describe("what cannot be stored becomes a placeholder that says so", () => {
  it("a closure over a local variable throws the documented error and is reported", () => {
    const { restored, notRestored } = carry(
      "function makeCounter() { let n = 0; return () => ++n } var counter = makeCounter(); counter();",
    );
    expect(notRestored).toEqual([{ name: "counter", type: "closure" }]);
    const err = thrown(() => restored.evalSync("counter()"));
    expect(err.code).toBe("GUEST_ERROR");
    expect(err.guest?.message).toBe(
      "Value for 'counter' was not restored because it is not serializable (type: closure).",
    );
    expect(restored.evalSync("makeCounter()()")).toBe(1);
  });

  it("a placeholder carried into a later snapshot keeps its type and is not reported again", () => {
    const { restored } = carry("function makeCounter() { let n = 0; return () => ++n } var counter = makeCounter();");
    restored.evalSync("var later = 1");
    const again = Sandbox.restore(restored.snapshot());
    live.push(again.sandbox);
    expect(again.notRestored).toEqual([]);
    expect(thrown(() => again.sandbox.evalSync("counter")).guest?.message).toBe(
      "Value for 'counter' was not restored because it is not serializable (type: closure).",
    );
    expect(again.sandbox.evalSync("later")).toBe(1);
    // Assigning still replaces the placeholder with an ordinary value, which is then stored.
    again.sandbox.evalSync("counter = 5");
    expect(Sandbox.restore(again.sandbox.snapshot()).sandbox.evalSync("counter")).toBe(5);
  });

  it("a guest accessor cannot pass itself off as a carried placeholder", () => {
    const { restored } = carry("var lost = new WeakMap();");
    restored.evalSync(
      "Object.defineProperty(globalThis, 'forged', { get: Object.getOwnPropertyDescriptor(globalThis, 'lost').get.bind(null), configurable: true, enumerable: true }); 0",
    );
    const again = Sandbox.restore(restored.snapshot());
    live.push(again.sandbox);
    expect(again.notRestored.map((n) => n.name)).toEqual(["forged"]);
  });

  it("names each kind: Proxy, WeakMap, WeakSet, Promise, generator, symbol, native function, accessor", () => {
    const { restored, notRestored } = carry(`
      var proxy = new Proxy({}, {}), weak = new WeakMap(), weakSet = new WeakSet(), pending = Promise.resolve(1);
      var gen = (function* () { yield 1 })(), sym = Symbol("s"), log = console.log;
      Object.defineProperty(globalThis, "computed", { get: (() => { let n = 1; return () => n })(), configurable: true, enumerable: true });
    `);
    const byName = (a: { name: string }, b: { name: string }): number => a.name.localeCompare(b.name);
    expect([...notRestored].sort(byName)).toEqual(
      [
        { name: "proxy", type: "Proxy" },
        { name: "weak", type: "WeakMap" },
        { name: "weakSet", type: "WeakSet" },
        { name: "pending", type: "Promise" },
        { name: "gen", type: "Generator" },
        { name: "sym", type: "symbol" },
        { name: "log", type: "native function" },
        { name: "computed", type: "accessor (closure)" },
      ].sort(byName),
    );
    for (const { name, type } of notRestored) {
      expect(thrown(() => restored.evalSync(name)).guest?.message).toBe(
        `Value for '${name}' was not restored because it is not serializable (type: ${type}).`,
      );
    }
  });

  it("a part of a value is replaced alone, by path; collections holding one are replaced whole", () => {
    const { restored, notRestored } = carry(`
      function local() { let x = 1; return () => x }
      var state = { rows: [1, 2], onDone: local(), nested: { list: [0, Symbol.iterator, 2] } };
      var byKey = new Map([["f", local()]]);
    `);
    expect(notRestored).toEqual([
      { name: "state.onDone", type: "closure" },
      { name: "state.nested.list[1]", type: "symbol" },
      { name: "byKey", type: "closure" },
    ]);
    expect(restored.evalSync("[state.rows, state.nested.list.length, state.nested.list[2]]")).toEqual([[1, 2], 3, 2]);
    expect(thrown(() => restored.evalSync("state.onDone")).guest?.message).toBe(
      "Value for 'state.onDone' was not restored because it is not serializable (type: closure).",
    );
  });

  it("assigning to a placeholder replaces it", () => {
    const { restored } = carry("var p = Promise.resolve(); var holder = { p: Promise.resolve() }");
    expect(restored.evalSync("p = 5; holder.p = 6; [p, holder.p]")).toEqual([5, 6]);
  });

  it("an instance of a class with private fields is a placeholder, not a broken object", () => {
    const { restored, notRestored } = carry(
      "class Vault { #secret = 1; open() { return this.#secret } } var v = new Vault();",
    );
    expect(notRestored).toEqual([{ name: "v", type: "instance with private fields" }]);
    expect(restored.evalSync("new Vault().open()")).toBe(1);
  });

  it("a class whose method closes over a local is a closure", () => {
    const { notRestored } = carry(
      "function make() { const secret = 1; return class Inner { get() { return secret } } } var Made = make();",
    );
    expect(notRestored).toEqual([{ name: "Made", type: "closure" }]);
  });
});

describe("taking a snapshot runs no guest code", () => {
  it("getters, toJSON, overridden built-ins and Proxies are never invoked while writing", () => {
    const sb = sandbox();
    sb.evalSync(`
      var calls = 0;
      const touch = () => { calls++; throw new Error("guest code ran") };
      Map.prototype.forEach = touch; Set.prototype.forEach = touch; Function.prototype.toString = touch;
      Object.defineProperty(Array.prototype, "0", { get: touch, configurable: true });
      Object.defineProperty(Object.prototype, "constructor", { get: touch, configurable: true });
      var data = { toJSON: touch, [Symbol.toPrimitive]: touch, valueOf: touch, list: [, 2], m: new Map([[1, 2]]), s: new Set([3]) };
      var trap = new Proxy({}, { get: touch, ownKeys: touch, getOwnPropertyDescriptor: touch, getPrototypeOf: touch });
      var inherits = Object.create(trap);
      class Item { constructor() { this.v = 1 } } var item = new Item();
      Object.defineProperty(globalThis, "lazy", { get: touch, configurable: true, enumerable: true });
      undefined
    `);
    const { sandbox: restored, notRestored } = Sandbox.restore(sb.snapshot());
    live.push(restored);
    expect(sb.evalSync("calls")).toBe(0);
    expect(notRestored).toEqual([
      { name: "trap", type: "Proxy" },
      { name: "inherits", type: "Proxy" },
    ]);
    // Built-ins are the restored sandbox's own; the guest's getter comes back as the same function as `touch`.
    expect(
      restored.evalSync(
        "[data.list[1], 0 in data.list, item.v, item instanceof Item, Object.getOwnPropertyDescriptor(globalThis, 'lazy').get === touch]",
      ),
    ).toEqual([2, false, 1, true, true]);
  });
});

describe("snapshot and restore refuse at the right times", () => {
  it("snapshot refuses while an async eval runs, on a disposed sandbox, and with bad options", async () => {
    const sb = sandbox();
    let called!: () => void;
    const inside = new Promise<void>((resolve) => (called = resolve));
    sb.defineAsyncFunction("wait", () => {
      called();
      return new Promise((resolve) => setTimeout(resolve, 20));
    });
    const running = sb.eval("await wait(); 1");
    await inside;
    expect(thrown(() => sb.snapshot()).code).toBe("BUSY");
    await running;
    expect(() => sb.snapshot()).not.toThrow();
    expect(thrown(() => sb.snapshot({ maxSnapshotBytes: -1 })).code).toBe("INVALID_ARGUMENT");
    expect(thrown(() => sb.snapshot({ bogus: 1 } as never)).code).toBe("INVALID_ARGUMENT");
    sb.dispose();
    expect(thrown(() => sb.snapshot()).code).toBe("DISPOSED");
  });

  it("restore applies the new sandbox's options", () => {
    const sb = sandbox();
    sb.evalSync("var data = [1, 2, 3]");
    const { sandbox: restored } = Sandbox.restore(sb.snapshot(), {
      memoryLimitBytes: 8 * 1024 * 1024,
      executionTimeoutMs: 50,
    });
    live.push(restored);
    expect(restored.options.memoryLimitBytes).toBe(8 * 1024 * 1024);
    expect(thrown(() => restored.evalSync("while (true) {}")).code).toBe("TIMEOUT");
    expect(thrown(() => Sandbox.restore(sb.snapshot(), { memoryLimitBytes: "x" } as never)).code).toBe(
      "INVALID_ARGUMENT",
    );
  });

  it("a class static block that never ends stops at restoreTimeoutMs with TIMEOUT", () => {
    const sb = sandbox();
    // Re-created before `armed` is restored (functions come first), the block spins.
    sb.evalSync("var armed = true; class Spin { static { while (armed === undefined) {} } }");
    const err = thrown(() => Sandbox.restore(sb.snapshot(), { restoreTimeoutMs: 50 }));
    expect(err.code).toBe("TIMEOUT");
  });
});
