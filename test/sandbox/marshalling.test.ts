import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { GuestOpaque, Sandbox, SandboxError } from "../../src/index.js";
import { syncCodeOf } from "../hostile/harness.js";

let sb: Sandbox;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(() => sb.dispose());

/** Host -> guest (setGlobal) -> host (completion value). */
function roundTrip<T>(value: T): T {
  sb.setGlobal("v", value);
  return sb.evalSync("v") as T;
}

describe("primitives cross exactly", () => {
  it("keeps undefined and null apart", () => {
    expect(roundTrip(undefined)).toBeUndefined();
    expect(roundTrip(null)).toBeNull();
    sb.setGlobal("u", undefined);
    sb.setGlobal("n", null);
    expect(sb.evalSync("[typeof u, n === null, u === undefined]")).toEqual(["undefined", true, true]);
  });

  it("keeps both booleans", () => {
    expect(roundTrip(true)).toBe(true);
    expect(roundTrip(false)).toBe(false);
  });

  it.each([
    ["-0", -0],
    ["NaN", NaN],
    ["Infinity", Infinity],
    ["-Infinity", -Infinity],
    ["int32 min", -(2 ** 31)],
    ["int32 max", 2 ** 31 - 1],
    ["just past int32", 2 ** 31],
    ["max safe integer", Number.MAX_SAFE_INTEGER],
    ["min value", Number.MIN_VALUE],
    ["fraction", 0.1 + 0.2],
  ])("keeps the number %s", (_label, n) => {
    expect(Object.is(roundTrip(n), n)).toBe(true);
  });

  it("keeps -0 as -0 inside the guest", () => {
    sb.setGlobal("z", -0);
    expect(sb.evalSync("Object.is(z, -0)")).toBe(true);
    expect(Object.is(sb.evalSync("-0"), -0)).toBe(true);
  });

  it.each([
    ["zero", 0n],
    ["small negative", -5n],
    ["2^64", 2n ** 64n],
    ["huge positive (4000 bits)", 2n ** 4000n + 12345n],
    ["huge negative", -(3n ** 2000n)],
  ])("keeps the BigInt %s", (_label, b) => {
    const back = roundTrip(b);
    expect(typeof back).toBe("bigint");
    expect(back === b).toBe(true);
  });

  it("computes with a BigInt received from the host", () => {
    sb.setGlobal("b", 2n ** 100n);
    expect(sb.evalSync("b * 2n + 1n")).toBe(2n ** 101n + 1n);
  });

  it.each([
    ["empty", ""],
    ["latin1 with embedded NUL", "a\u0000b\u0000"],
    ["lone high surrogate", "x\uD800y"],
    ["lone low surrogate at the end", "abc\uDFFF"],
    ["reversed surrogate pair", "\uDC00\uD800"],
    ["astral and BMP mix", "😀 é 中 \u0000 \uFFFF"],
    ["long non-latin1", "ж".repeat(100_000)],
  ])("keeps the string %s unit for unit", (_label, s) => {
    const back = roundTrip(s);
    expect(back.length).toBe(s.length);
    expect(back === s).toBe(true);
  });

  it("sees a lone surrogate and NUL as single code units inside the guest", () => {
    sb.setGlobal("s", "\uD800\u0000");
    expect(sb.evalSync("[s.length, s.charCodeAt(0), s.charCodeAt(1)]")).toEqual([2, 0xd800, 0]);
  });
});

describe("containers cross exactly", () => {
  it("keeps holes in arrays (leading, middle and trailing)", () => {
    // eslint-disable-next-line no-sparse-arrays
    const arr = [, 1, , undefined, 3, ,];
    const back = roundTrip(arr);
    expect(back.length).toBe(arr.length);
    expect(Object.keys(back)).toEqual(Object.keys(arr));
    expect(0 in back).toBe(false);
    expect(3 in back).toBe(true);
    expect(back[3]).toBeUndefined();
  });

  it("keeps holes made by the guest", () => {
    const back = sb.evalSync("const a = [1]; a[5] = 2; a.length = 8; a") as unknown[];
    expect(back.length).toBe(8);
    expect(Object.keys(back)).toEqual(["0", "5"]);
  });

  it("keeps a very sparse array without materialising it", () => {
    const back = sb.evalSync("const s = []; s[2**32 - 2] = 'last'; s") as unknown[];
    expect(back.length).toBe(2 ** 32 - 1);
    expect(back[2 ** 32 - 2]).toBe("last");
    expect(Object.keys(back)).toEqual([String(2 ** 32 - 2)]);
  });

  it("keeps plain objects with their key order", () => {
    const obj = { b: 1, a: "two", nested: { deep: [true, null] }, "with space": 0, 7: "num" };
    const back = roundTrip(obj);
    expect(back).toStrictEqual(obj);
    expect(Object.keys(back)).toEqual(Object.keys(obj));
  });

  it("keeps null-prototype objects null-prototype", () => {
    const obj = Object.assign(Object.create(null) as Record<string, unknown>, { k: 1 });
    const back = roundTrip(obj);
    expect(Object.getPrototypeOf(back)).toBeNull();
    expect(back.k).toBe(1);
    sb.setGlobal("np", obj);
    expect(sb.evalSync("Object.getPrototypeOf(np) === null")).toBe(true);
  });

  it("keeps Date time values, invalid dates included", () => {
    const d = new Date(Date.UTC(2024, 1, 29, 12, 34, 56, 789));
    const back = roundTrip(d);
    expect(back).toBeInstanceOf(Date);
    expect(back.getTime()).toBe(d.getTime());
    expect(Number.isNaN(roundTrip(new Date(NaN)).getTime())).toBe(true);
  });

  it.each([
    ["no flags", /a+b/],
    ["all common flags", /x.y/dgimsuy],
    ["escapes and slashes", /\/\d+[\]\\]/g],
    // biome-ignore lint/complexity/useRegexLiterals: the `v` flag needs a newer compile target than the sources use
    ["unicode sets", new RegExp("[\\p{L}--[a-z]]", "v")],
  ])("keeps RegExp source and flags: %s", (_label, re) => {
    const back = roundTrip(re);
    expect(back).toBeInstanceOf(RegExp);
    expect(back.source).toBe(re.source);
    expect(back.flags).toBe(re.flags);
  });

  it("keeps Map entries, order and non-string keys", () => {
    const m = new Map<unknown, unknown>([
      [1, "one"],
      ["1", "string one"],
      [null, undefined],
      [2n, { x: 1 }],
    ]);
    const back = roundTrip(m);
    expect(back).toBeInstanceOf(Map);
    expect([...back.entries()]).toStrictEqual([...m.entries()]);
  });

  it("keeps Set members and order", () => {
    const s = new Set<unknown>([3, "3", NaN, -0, undefined]);
    const back = roundTrip(s);
    expect(back).toBeInstanceOf(Set);
    expect([...back]).toStrictEqual([...s]);
  });

  it("keeps ArrayBuffer bytes", () => {
    const ab = new ArrayBuffer(300);
    new Uint8Array(ab).forEach((_, i, a) => {
      a[i] = (i * 7) & 0xff;
    });
    const back = roundTrip(ab);
    expect(back).toBeInstanceOf(ArrayBuffer);
    expect(Buffer.from(back).equals(Buffer.from(ab))).toBe(true);
  });

  it("keeps an empty ArrayBuffer", () => {
    const back = roundTrip(new ArrayBuffer(0));
    expect(back).toBeInstanceOf(ArrayBuffer);
    expect(back.byteLength).toBe(0);
  });

  const typedCases: Array<[string, () => ArrayBufferView & { length: number }]> = [
    ["Int8Array", () => Int8Array.of(-128, 0, 127)],
    ["Uint8Array", () => Uint8Array.of(0, 1, 255)],
    ["Uint8ClampedArray", () => Uint8ClampedArray.of(0, 128, 255)],
    ["Int16Array", () => Int16Array.of(-32768, 32767)],
    ["Uint16Array", () => Uint16Array.of(0, 65535)],
    ["Int32Array", () => Int32Array.of(-(2 ** 31), 2 ** 31 - 1)],
    ["Uint32Array", () => Uint32Array.of(0, 2 ** 32 - 1)],
    ["Float32Array", () => Float32Array.of(1.5, -0, NaN, Infinity)],
    ["Float64Array", () => Float64Array.of(Math.PI, -0, NaN, -Infinity)],
    ["BigInt64Array", () => BigInt64Array.of(-(2n ** 63n), 2n ** 63n - 1n)],
    ["BigUint64Array", () => BigUint64Array.of(0n, 2n ** 64n - 1n)],
  ];

  it.each(typedCases)("keeps a %s, kind and elements", (name, make) => {
    const ta = make();
    const back = roundTrip(ta);
    expect(back.constructor.name).toBe(name);
    expect(back.length).toBe(ta.length);
    expect(
      Array.from(back as unknown as ArrayLike<unknown>).every((x, i) =>
        Object.is(x, (ta as unknown as ArrayLike<unknown>)[i]),
      ),
    ).toBe(true);
    sb.setGlobal("t", ta);
    expect(sb.evalSync("t.constructor.name")).toBe(name);
  });

  it("copies exactly a view's own bytes, never the rest of its buffer", () => {
    const base = new Uint16Array(16).map((_, i) => i * 1000);
    const view = new Uint16Array(base.buffer, 6, 4);
    const back = roundTrip(view);
    expect(back.byteOffset).toBe(0);
    expect(back.length).toBe(4);
    expect([...back]).toEqual([...view]);
    expect(back.buffer.byteLength).toBe(8);
  });

  it("keeps two views on one buffer sharing it when the buffer itself crosses too", () => {
    const buf = new ArrayBuffer(8);
    const back = roundTrip({ buf, a: new Uint8Array(buf), b: new Uint32Array(buf, 4, 1) });
    expect(back.a.buffer).toBe(back.buf);
    expect(back.b.buffer).toBe(back.buf);
    back.b[0] = 0xffffffff;
    expect(back.a[7]).toBe(0xff);
    const alone = roundTrip({ a: new Uint8Array(buf), b: new Uint32Array(buf, 4, 1) });
    expect(alone.a.buffer).not.toBe(alone.b.buffer);
  });
});

describe("errors cross as Error objects", () => {
  it.each([
    ["Error", new Error("plain")],
    ["TypeError", new TypeError("type")],
    ["RangeError", new RangeError("range")],
    ["SyntaxError", new SyntaxError("syntax")],
    ["ReferenceError", new ReferenceError("ref")],
    ["EvalError", new EvalError("eval")],
    ["URIError", new URIError("uri")],
  ])("keeps a %s with its class, name and message", (name, err) => {
    const back = roundTrip(err);
    expect(back).toBeInstanceOf(err.constructor);
    expect(back.name).toBe(name);
    expect(back.message).toBe(err.message);
    sb.setGlobal("e", err);
    expect(sb.evalSync(`e instanceof ${name} && e.name === ${JSON.stringify(name)}`)).toBe(true);
  });

  it("keeps the name of a host Error subclass", () => {
    class QuotaError extends Error {
      override name = "QuotaError";
    }
    const back = roundTrip(new QuotaError("over quota"));
    expect(back).toBeInstanceOf(Error);
    expect(back.name).toBe("QuotaError");
    expect(back.message).toBe("over quota");
  });

  it("copies a guest Error subclass out with its name and base class", () => {
    const back = sb.evalSync(
      "class E extends TypeError { constructor(m) { super(m); this.name = 'E'; } }; new E('m')",
    ) as Error;
    expect(back).toBeInstanceOf(Error);
    expect(back.name).toBe("E");
    expect(back.message).toBe("m");
  });

  it("copies a guest Error's stack out", () => {
    const back = sb.evalSync("function makeIt() { return new RangeError('r'); }\nmakeIt()", {
      filename: "made.js",
    }) as Error;
    expect(back).toBeInstanceOf(RangeError);
    expect(back.stack).toContain("makeIt");
    expect(back.stack).toContain("made.js");
  });
});

describe("shared references and cycles", () => {
  it("keeps two references to one object as one object", () => {
    const shared = { n: 1 };
    const back = roundTrip({ a: shared, b: shared, list: [shared] });
    expect(back.a).toBe(back.b);
    expect(back.list[0]).toBe(back.a);
    sb.setGlobal("g", { a: shared, b: shared });
    expect(sb.evalSync("g.a === g.b")).toBe(true);
  });

  it("keeps an object cycle", () => {
    const o: Record<string, unknown> = { name: "root" };
    o.self = o;
    o.child = { parent: o };
    const back = roundTrip(o);
    expect(back.self).toBe(back);
    expect((back.child as Record<string, unknown>).parent).toBe(back);
  });

  it("keeps cycles through arrays, Maps and Sets", () => {
    const arr: unknown[] = [];
    const m = new Map<unknown, unknown>();
    const s = new Set<unknown>();
    arr.push(arr, m, s);
    m.set(m, arr);
    s.add(s);
    const back = roundTrip(arr);
    const [selfRef, bm, bs] = back as [unknown, Map<unknown, unknown>, Set<unknown>];
    expect(selfRef).toBe(back);
    expect(bm.get(bm)).toBe(back);
    expect(bs.has(bs)).toBe(true);
  });

  it("copies a guest-made cycle out", () => {
    const back = sb.evalSync("const c = { k: 1 }; c.me = c; c") as Record<string, unknown>;
    expect(back.me).toBe(back);
  });
});

describe("host functions see copies both ways", () => {
  it("passes every value class through a host function's arguments and result", () => {
    sb.defineFunction("echo", (x) => x);
    const back = sb.evalSync(
      "const o = { u: undefined, n: null, z: -0, nan: NaN, big: -(2n ** 70n), s: '\\uD800\\u0000', h: [1, , 3], " +
        "d: new Date(5), r: /q/gi, m: new Map([[1, 2]]), st: new Set(['x']), ab: new Uint8Array([9, 8]).buffer, " +
        "f: new Float64Array([1.5]), e: new TypeError('t') }; o.cyc = o; const b = echo(o); " +
        "[b.cyc === b, Object.is(b.z, -0), Number.isNaN(b.nan), b.big === -(2n ** 70n), b.s === o.s, 1 in b.h, b.h.length, " +
        "b.d.getTime(), String(b.r), b.m.get(1), b.st.has('x'), new Uint8Array(b.ab)[1], b.f[0], b.e instanceof TypeError, " +
        "'u' in b && b.u === undefined, b.n === null]",
    );
    expect(back).toEqual([true, true, true, true, true, false, 3, 5, "/q/gi", 2, true, 8, 1.5, true, true, true]);
  });

  it("gives the guest its own copy: host mutation after the call is not seen", () => {
    const kept: Array<Record<string, number>> = [];
    sb.defineFunction("keep", (x) => {
      kept.push(x as Record<string, number>);
      return x;
    });
    expect(sb.evalSync("const orig = { n: 1 }; const back = keep(orig); back.n = 2; orig.n")).toBe(1);
    expect(kept[0]!.n).toBe(1);
  });
});

describe("functions and symbols cannot cross", () => {
  it("refuses a host function with UNSERIALIZABLE, pointing to defineFunction", () => {
    let caught: unknown;
    try {
      sb.setGlobal("f", () => 1);
    } catch (err) {
      caught = err;
    }
    expect(caught).toBeInstanceOf(SandboxError);
    expect((caught as SandboxError).code).toBe("UNSERIALIZABLE");
    expect((caught as SandboxError).message).toMatch(/function/);
    expect((caught as SandboxError).message).toMatch(/defineFunction/);
  });

  it("refuses a host symbol with UNSERIALIZABLE", () => {
    expect(syncCodeOf(() => sb.setGlobal("s", Symbol("q")))).toBe("UNSERIALIZABLE");
    expect(syncCodeOf(() => sb.setGlobal("s", { deep: [Symbol("q")] }))).toBe("UNSERIALIZABLE");
  });

  it("refuses a guest function result with UNSERIALIZABLE naming the function", () => {
    let caught: unknown;
    try {
      sb.evalSync("(function namedThing() {})");
    } catch (err) {
      caught = err;
    }
    expect((caught as SandboxError).code).toBe("UNSERIALIZABLE");
    expect((caught as SandboxError).message).toMatch(/function/);
    expect((caught as SandboxError).message).toContain("namedThing");
  });

  it("refuses a guest symbol nested in a result, saying where", () => {
    let caught: unknown;
    try {
      sb.evalSync("({ list: [1, Symbol('s')] })");
    } catch (err) {
      caught = err;
    }
    expect((caught as SandboxError).code).toBe("UNSERIALIZABLE");
    expect((caught as SandboxError).message).toMatch(/symbol/);
    expect((caught as SandboxError).message).toContain("list");
  });

  it("describes functions and symbols as GuestOpaque when asked", () => {
    const back = sb.evalSync("[function namedThing() {}, Symbol('s'), 1]", { unserializable: "describe" }) as unknown[];
    expect(back[0]).toBeInstanceOf(GuestOpaque);
    expect((back[0] as GuestOpaque).kind).toBe("function");
    expect((back[0] as GuestOpaque).name).toBe("namedThing");
    expect((back[1] as GuestOpaque).kind).toBe("symbol");
    expect(back[2]).toBe(1);
  });

  it("keeps a symbol's description, without running a replaced description getter", () => {
    sb.evalSync(
      "globalThis.getterRan = false; Object.defineProperty(Symbol.prototype, 'description', { get() { getterRan = true; return 'forged'; } })",
    );
    const back = sb.evalSync("[Symbol('my key'), Symbol(), Symbol.for('café ☕'), Symbol.iterator]", {
      unserializable: "describe",
    }) as GuestOpaque[];
    expect(back.map(String)).toEqual(["Symbol(my key)", "Symbol()", "Symbol(café ☕)", "Symbol(Symbol.iterator)"]);
    expect(sb.evalSync("getterRan")).toBe(false);
    expect(() => sb.evalSync("Symbol('named')")).toThrow(/symbol 'named'/);
  });

  it("keeps a function's non-ASCII name intact", () => {
    expect(String(sb.evalSync("(function café() {})", { unserializable: "describe" }))).toBe("[Function café]");
  });

  it("turns a host function returning a function into a guest error, not a crash", () => {
    sb.defineFunction("makeFn", () => () => 1);
    expect(
      sb.evalSync("try { makeFn(); 'no error' } catch (e) { e instanceof Error && /function/.test(e.message) }"),
    ).toBe(true);
  });
});

describe("reading a guest value never runs guest code", () => {
  it("does not run a getter that loops forever on a returned object", () => {
    sb.evalSync("globalThis.getterHits = 0");
    expect(
      syncCodeOf(() => sb.evalSync("({ a: 1, get x() { getterHits++; while (true) {} } })", { timeoutMs: 2000 })),
    ).toBe("UNSERIALIZABLE");
    const described = sb.evalSync("({ a: 1, get x() { getterHits++; while (true) {} } })", {
      timeoutMs: 2000,
      unserializable: "describe",
    }) as Record<string, unknown>;
    expect(sb.evalSync("getterHits")).toBe(0);
    expect(described.a).toBe(1);
    expect((described.x as GuestOpaque).kind).toBe("accessor");
  });

  it("does not run an inherited getter of a returned class instance", () => {
    const back = sb.evalSync(
      "globalThis.hits = 0; class A { constructor() { this.a = 1; } get x() { hits++; return 2; } }; new A()",
    );
    expect(back).toEqual({ a: 1 });
    expect(sb.evalSync("hits")).toBe(0);
  });

  it("does not run a `then` getter on a returned object", () => {
    sb.evalSync("globalThis.thenHits = 0");
    let back: unknown;
    try {
      back = sb.evalSync("({ a: 1, get then() { thenHits++; return undefined; } })", { unserializable: "describe" });
    } catch {
      // failing to copy is acceptable; running the getter is not
    }
    expect(sb.evalSync("thenHits")).toBe(0);
    if (back !== undefined) expect((back as Record<string, unknown>).a).toBe(1);
  });

  it("does not call a `then` method of a returned thenable", () => {
    sb.evalSync("globalThis.thenCalls = 0");
    let back: unknown;
    try {
      back = sb.evalSync("({ then(resolve) { thenCalls++; resolve(42); } })", { unserializable: "describe" });
    } catch {
      // refusing is acceptable
    }
    expect(sb.evalSync("thenCalls")).toBe(0);
    expect(back).not.toBe(42);
  });

  it("does not follow a Proxy nested in a result", () => {
    sb.evalSync("globalThis.trapHits = 0");
    const traps =
      "{ get() { trapHits++; while (true) {} }, ownKeys() { trapHits++; while (true) {} }, getOwnPropertyDescriptor() { trapHits++; while (true) {} }, getPrototypeOf() { trapHits++; while (true) {} } }";
    expect(syncCodeOf(() => sb.evalSync(`({ p: new Proxy({ secret: 1 }, ${traps}) })`, { timeoutMs: 2000 }))).toBe(
      "UNSERIALIZABLE",
    );
    const back = sb.evalSync(`({ p: new Proxy({ secret: 1 }, ${traps}) })`, {
      timeoutMs: 2000,
      unserializable: "describe",
    }) as Record<string, unknown>;
    expect((back.p as GuestOpaque).kind).toBe("proxy");
    expect(sb.evalSync("trapHits")).toBe(0);
  });

  it("does not follow a Proxy returned as the completion value", () => {
    sb.evalSync("globalThis.trapHits = 0");
    const traps =
      "{ get() { trapHits++; while (true) {} }, ownKeys() { trapHits++; while (true) {} }, getOwnPropertyDescriptor() { trapHits++; while (true) {} } }";
    let code: string | undefined;
    try {
      sb.evalSync(`new Proxy({ secret: 1 }, ${traps})`, { timeoutMs: 2000 });
    } catch (err) {
      code = (err as SandboxError).code;
    }
    expect(code).toBe("UNSERIALIZABLE");
    expect(sb.evalSync("trapHits")).toBe(0);
  });

  it("does not call toJSON or valueOf", () => {
    const back = sb.evalSync(
      "globalThis.calls = 0; const d = new Date(7); d.toJSON = undefined; Object.defineProperty(Object.prototype, 'toJSON', { value() { calls++; return 'json'; }, configurable: true }); " +
        "Number.prototype.valueOf = function () { calls++; return 0; }; ({ d, n: 5 })",
    ) as Record<string, unknown>;
    expect((back.d as Date).getTime()).toBe(7);
    expect(back.n).toBe(5);
    expect(sb.evalSync("calls")).toBe(0);
  });
});

describe("prototype pollution through copied keys", () => {
  it("keeps guest `__proto__` and `constructor` keys as plain own data on the host", () => {
    const back = sb.evalSync(
      `JSON.parse('{"__proto__": {"polluted": true}, "constructor": {"prototype": {"polluted2": true}}}')`,
    ) as Record<string, unknown>;
    expect(Object.keys(back)).toEqual(["__proto__", "constructor"]);
    expect(Object.getOwnPropertyDescriptor(back, "__proto__")?.value).toEqual({ polluted: true });
    expect(Object.getPrototypeOf(back) === Object.prototype || Object.getPrototypeOf(back) === null).toBe(true);
    expect((back as { polluted?: unknown }).polluted).toBeUndefined();
    expect(({} as { polluted?: unknown }).polluted).toBeUndefined();
    expect(({} as { polluted2?: unknown }).polluted2).toBeUndefined();
    expect((Object.prototype as { polluted?: unknown }).polluted).toBeUndefined();
  });

  it("keeps a nested guest `__proto__` key from changing the host object's prototype", () => {
    const back = sb.evalSync(`({ inner: JSON.parse('{"__proto__": {"isAdmin": true}}') })`) as {
      inner: { isAdmin?: unknown };
    };
    expect(back.inner.isAdmin).toBeUndefined();
    expect(Object.hasOwn(back.inner, "__proto__")).toBe(true);
  });

  it("keeps a host `__proto__` key from changing the guest object's prototype", () => {
    sb.setGlobal("payload", JSON.parse('{"__proto__": {"isAdmin": true}, "a": 1}'));
    expect(
      sb.evalSync(
        "[payload.isAdmin, Object.hasOwn(payload, '__proto__'), ({}).isAdmin, Object.getPrototypeOf(payload) === Object.prototype]",
      ),
    ).toEqual([undefined, true, undefined, true]);
  });

  it("rejects prototype paths as global names", () => {
    expect(syncCodeOf(() => sb.defineFunction("__proto__.x", () => 1))).toBe("INVALID_ARGUMENT");
    expect(syncCodeOf(() => sb.defineFunction("Object.prototype.x", () => 1))).toBe("INVALID_ARGUMENT");
    expect(syncCodeOf(() => sb.setGlobal("__proto__", 1))).toBe("INVALID_ARGUMENT");
  });
});

describe("size caps give typed errors", () => {
  it("refuses a guest result nested deeper than the cap with UNSERIALIZABLE", () => {
    expect(syncCodeOf(() => sb.evalSync("let o = {}; for (let i = 0; i < 10000; i++) o = { o }; o"))).toBe(
      "UNSERIALIZABLE",
    );
    expect(sb.evalSync("1+1")).toBe(2);
  });

  it("refuses a host value nested deeper than the cap with UNSERIALIZABLE", () => {
    let o: Record<string, unknown> = {};
    for (let i = 0; i < 10_000; i++) o = { o };
    expect(syncCodeOf(() => sb.setGlobal("deep", o))).toBe("UNSERIALIZABLE");
    let a: unknown[] = [];
    for (let i = 0; i < 10_000; i++) a = [a];
    expect(syncCodeOf(() => sb.setGlobal("deep", a))).toBe("UNSERIALIZABLE");
  });

  it("refuses a guest result with more parts than the node cap with UNSERIALIZABLE", () => {
    expect(syncCodeOf(() => sb.evalSync("new Array(2.1e6).fill(0)"))).toBe("UNSERIALIZABLE");
  });

  it("copies a value just under the depth cap", () => {
    const back = sb.evalSync("let o = { end: true }; for (let i = 0; i < 400; i++) o = { o }; o") as Record<
      string,
      unknown
    >;
    let cur = back;
    for (let i = 0; i < 400; i++) cur = cur.o as Record<string, unknown>;
    expect(cur.end).toBe(true);
  });
});
