/**
 * The wire format (native/wire.h) and the snapshot body format (native/snapshot.h) are stored by
 * users: a snapshot taken by one build is restored by the next, and host code decodes what the
 * guest codec writes. This test pins the exact bytes both codecs produce for values of every
 * shape, as SHA-256 digests committed in fixtures/format-stability.json, so a refactor of the
 * native codecs cannot change a byte unnoticed. It drives the addon directly (the raw bytes never
 * reach the public API).
 *
 * After an intended format change, regenerate the digests with
 * `UPDATE_FORMAT_DIGESTS=1 npx vitest run test/snapshot/format-stability.test.ts` and say why in
 * the commit.
 */
import { createHash } from "node:crypto";
import { readFileSync, writeFileSync } from "node:fs";
import { afterEach, describe, expect, it } from "vitest";
import { decodeValue, encodeValue } from "../../src/marshal.js";
import {
  isNativeError,
  JobKind,
  native,
  NativeStatus,
  type NativeDispatcher,
  type NativeHandle,
  type NativePrimitiveDispatcher,
} from "../../src/native.js";
import { createHandle, defineHostFunction, requestEval, requestSnapshot } from "../../src/request.js";

const FIXTURE = new URL("./fixtures/format-stability.json", import.meta.url);
const UPDATE = process.env.UPDATE_FORMAT_DIGESTS === "1";
const expected: Record<string, string> = UPDATE
  ? {}
  : (JSON.parse(readFileSync(FIXTURE, "utf8")) as Record<string, string>);
const actual: Record<string, string> = {};

const BUDGET_MS = 60_000; // a budget, never a timing assertion: these evals are tiny

const live: NativeHandle[] = [];
afterEach(() => {
  for (const h of live.splice(0)) h.dispose();
});

/** Host-call argument bytes, captured by the dispatcher of the handle that received them. */
let capturedArgs: Buffer[] = [];

const undefinedBytes = encodeValue(undefined);
// The addon holds a handle's dispatchers weakly (src/host-calls.ts keeps the product's alive), so
// these live here: a closure made per handle would be collected by the next full GC, and a host
// call after it would fail in the guest ("the sandbox is shutting down"), changing its digest.
const recordArgs: NativeDispatcher = (kind, _fnId, _callId, argLength, args) => {
  if (kind === 0) capturedArgs.push(Buffer.from(args ?? native.exchange.subarray(0, argLength)));
  return Buffer.from(undefinedBytes);
};
const noPrimitiveCalls: NativePrimitiveDispatcher = () => undefined;

function handle(): NativeHandle {
  const h = createHandle(
    {
      memoryLimitBytes: 64 << 20,
      maxStackSizeBytes: 1 << 20,
      captureConsole: false,
      maxConsoleBytes: 0,
      copyLimitBytes: 256 << 20,
      maxHostCallsInFlight: 10_000,
    },
    recordArgs,
    noPrimitiveCalls,
  );
  live.push(h);
  return h;
}

function digest(bytes: Uint8Array | string): string {
  return createHash("sha256").update(bytes).digest("hex");
}

/** Runs `code` inline and returns the bytes of its completion value (or the failure text). */
function evalBytes(h: NativeHandle, code: string, describe: boolean): Buffer | string {
  requestEval(JobKind.Eval, h.id, 0, BUDGET_MS, describe ? { unserializable: "describe" } : {}, false);
  const extras = native.evalSync(code, "<stability>");
  const s = native.syncStats;
  // A guest error's value is the thrown value: its text says what failed.
  if (s[0] !== 0)
    return `status ${s[0]}: ${extras?.[1] ?? ""} ${s[0] === 1 ? String((decodeValue(valueBytes(extras)) as Error).message) : ""}`;
  return valueBytes(extras);
}

function valueBytes(extras: [Buffer | undefined, string, Buffer | undefined] | undefined): Buffer {
  const inExchange = native.syncStats[7]!;
  return Buffer.from(inExchange >= 0 ? native.exchange.subarray(0, inExchange) : extras![0]!);
}

/** The bytes of a global, or the failure text (pinned as it read when failures carried an eval status). */
function globalBytes(h: NativeHandle, name: string): Buffer | string {
  const result = h.getGlobal(name);
  if (!isNativeError(result)) return Buffer.from(result);
  return `status ${result.code === "UNSERIALIZABLE" ? NativeStatus.Unserializable : result.code}: ${result.message}`;
}

function run(h: NativeHandle, code: string): void {
  const result = evalBytes(h, code, true);
  if (typeof result === "string") throw new Error(`setup failed: ${result}\n${code}`);
}

/** Records the digest of `bytes` under `name` and checks it against the committed one. */
function pin(name: string, bytes: Uint8Array | string): void {
  const d = digest(bytes);
  actual[name] = d;
  if (!UPDATE) expect(d, name).toBe(expected[name]);
}

// Values the boundary codec copies out, each an expression evaluated in a fresh context.
const VALUES: Record<string, string> = {
  primitives: `[undefined, null, true, false, 0, -0, 1, -1, 2147483647, -2147483648, 2147483648, 0.1, NaN, Infinity, -Infinity, 1e308, 5e-324]`,
  strings: `["", "a", "café", "日本語 ✓", "a\\uD800b\\uDFFF", "x\\u0000y", "\\u00ff\\u0100", "ab".repeat(300)]`,
  bigints: `[0n, 1n, -1n, 255n, -256n, 2n ** 64n, -(2n ** 64n) + 1n, 10n ** 40n, -(16n ** 30n)]`,
  cycles: `var a = { name: "a" }; a.self = a; var b = [a]; b.push(b); a.list = b; [a, b]`,
  sharedRefs: `var o = { k: 1 }; var arr = [1, 2]; ({ x: o, y: o, z: [o, arr, arr], w: { o } })`,
  maps: `var k = { key: 1 }; var m = new Map([[1, "one"], ["k", { deep: [1] }], [2n, null], [k, k], [NaN, -0]]); m.set(m, m); [m, k]`,
  sets: `var s = new Set([1, "1", 1n, undefined, null]); var inner = new Set([s]); s.add(inner); s.add(s); s`,
  typedArrays: `var buf = new ArrayBuffer(64); new Uint8Array(buf).forEach((_, i, a) => { a[i] = i * 7; });
    [new Int8Array(buf, 1, 3), new Uint8Array(buf, 2, 4), new Uint8ClampedArray(buf, 3, 2), new Int16Array(buf, 4, 3),
     new Uint16Array(buf, 6, 2), new Int32Array(buf, 8, 2), new Uint32Array(buf, 12, 1), new Float32Array(buf, 16, 2),
     new Float64Array(buf, 24, 2), new BigInt64Array(buf, 40, 1), new BigUint64Array(buf, 48, 1),
     new Float16Array(buf, 56, 4), new DataView(buf, 5, 9)]`,
  viewsAfterTheirBuffer: `var buf = new ArrayBuffer(32); new Uint8Array(buf)[3] = 9;
    [buf, new Uint16Array(buf, 2, 3), new DataView(buf), new Float64Array(buf, 8)]`,
  viewsOverOneBuffer: `var buf = new ArrayBuffer(16); var v = new Uint8Array(buf, 4, 4); [v, v, new Int32Array(buf), new DataView(buf, 1, 2)]`,
  emptyAndDetached: `var d = new ArrayBuffer(8); var dv = new Uint8Array(d); d.transfer(); [new ArrayBuffer(0), new Uint8Array(0), dv, d]`,
  resizable: `var r = new ArrayBuffer(8, { maxByteLength: 16 }); var t = new Uint8Array(r); var fixed = new Uint8Array(r, 4, 4); r.resize(6); [t, fixed, r]`,
  dates: `[new Date(Date.UTC(2024, 1, 29, 12, 30)), new Date(NaN), new Date(-1e15), new Date(8.64e15)]`,
  regexps: `[/a(b+)c/gimsu, /x/y, /[\\u{1F600}]/v, /d/d, new RegExp("a/b\\\\n"), /(?<n>.)\\k<n>/]`,
  errors: `class Custom extends RangeError {}
    var e1 = new Error("plain"), e2 = new TypeError("t"), e3 = new Custom("c"), e4 = new SyntaxError("s");
    e4.name = "Renamed"; var e5 = new ReferenceError(); Object.defineProperty(e5, "stack", { value: undefined }); var e6 = new EvalError("x"); e6.extra = 1;
    var e7 = new URIError("u"); e7.message = 42;
    [e1, e2, e3, e4, e5, e6, e7, Object.create(Error.prototype)]`,
  sparseArrays: `var s = [1, , 3]; s[20] = "end"; s.named = "dropped"; var h = []; h[4294967294] = "last"; h[2147483648] = "mid";
    var big = new Array(1000); big[999] = 1; [s, h, big, [,,,], Array(3).fill(0)]`,
  objectKeys: `var p = JSON.parse('{"__proto__": {"polluted": 1}, "constructor": 2}');
    var n = Object.create(null); n.k = 1; n["0"] = "zero"; n[4294967295] = "not an index"; n[-1] = "neg"; n["01"] = "lead";
    var wide = { "ключ": 1, "\\uD800": 2 }; [p, n, wide, { 1: "a", b: "b", 2: "c" }]`,
  accessorsAndNonEnumerable: `var o = { get g() { return 1; }, set s(v) {}, plain: 1 };
    Object.defineProperty(o, "hidden", { value: 2, enumerable: false }); var a = [1]; Object.defineProperty(a, 1, { get() { return 2; } }); [o, a]`,
  opaques: `function named() {} class K {} [named, K, () => 1, async function af() {}, Symbol("desc"), Symbol(), Symbol.iterator,
    new Proxy({}, {}), Promise.resolve(1), new WeakMap(), new WeakSet(), Math, new (class Inst { x = 1 })()]`,
  nested: `var deep = {}; var cur = deep; for (let i = 0; i < 100; i++) { cur.next = { i, arr: [i, [i]] }; cur = cur.next; } deep`,
};

describe("the boundary codec writes the same bytes for every shape", () => {
  for (const [name, code] of Object.entries(VALUES)) {
    it(`copies out ${name}`, () => {
      // A fresh context for each: the code declares globals.
      const described = evalBytes(handle(), code, true);
      expect(typeof described, String(described)).not.toBe("string");
      pin(`eval/${name}/describe`, described);
      pin(`eval/${name}/throw`, evalBytes(handle(), code, false));
      const h = handle();
      run(h, `globalThis.__value = (0, eval)(${JSON.stringify(code)})`);
      pin(`getGlobal/${name}`, globalBytes(h, "__value"));
    });
  }

  it("encodes host-call arguments", () => {
    capturedArgs = [];
    for (const [name, code] of Object.entries(VALUES)) {
      const h = handle();
      defineHostFunction(h, "record", 0, false);
      // Arguments that cannot be copied (functions, symbols...) make the call throw in the guest.
      const outcome = evalBytes(h, `record((0, eval)(${JSON.stringify(code)}))`, true);
      pin(`hostCall/${name}/outcome`, outcome);
    }
    const h = handle();
    defineHostFunction(h, "record", 0, false);
    run(h, `record(); record(1, "two", [3], { four: 4 }); var shared = {}; record(shared, shared, [shared])`);
    for (const [i, bytes] of capturedArgs.entries()) pin(`hostCall/${i}`, bytes);
  });

  it("decodes host values and copies them back out unchanged", () => {
    const shared = { k: 1 };
    const buf = new ArrayBuffer(24);
    new Uint8Array(buf).set([1, 2, 3, 4, 5, 6, 7, 8, 9]);
    const cyclic: Record<string, unknown> = { name: "c" };
    cyclic.self = cyclic;
    const host: Record<string, unknown> = {
      scalars: [undefined, null, true, false, 7, -0, 0.5, "s", "日本", 2n ** 70n, -(2n ** 70n)],
      shared: [shared, shared, { shared }],
      cyclic,
      collections: [
        new Map<unknown, unknown>([
          [1, shared],
          [shared, "v"],
        ]),
        new Set([1, "x", shared]),
      ],
      views: [
        new Uint8Array(buf, 1, 4),
        new Int16Array(buf, 2, 3),
        new Float64Array(buf, 8, 2),
        new DataView(buf, 3, 5),
        buf,
      ],
      dates: [new Date(0), new Date(NaN)],
      regexps: [/a+b/gi, /x/y],
      // Fixed stacks: a host error's own stack names this file's path, which differs per checkout.
      errors: [
        Object.assign(new TypeError("host"), { stack: "TypeError: host\n    at test" }),
        Object.assign(new RangeError("r"), { stack: "RangeError: r" }),
      ],
      sparse: [1, , 3],
      nullProto: Object.assign(Object.create(null) as object, { a: 1 }),
    };
    const h = handle();
    for (const [name, value] of Object.entries(host)) {
      const bytes = encodeValue(value);
      expect(h.setGlobal(name, bytes), name).toBeUndefined(); // no { code, message } failure
      pin(`roundTrip/${name}`, globalBytes(h, name));
    }
  });
});

describe("the handles this file drives", () => {
  it("still reach their dispatcher after a full garbage collection, so a host call's outcome never depends on GC timing", () => {
    const gc = (globalThis as { gc?: () => void }).gc;
    expect(gc, "vitest.config.ts runs the tests with --expose-gc").toBeTypeOf("function");
    const h = handle();
    defineHostFunction(h, "record", 0, false);
    gc!();
    expect(evalBytes(h, `record(new Uint8Array(2))`, true)).toEqual(Buffer.from(undefinedBytes));
  });
});

// Globals of a whole context, snapshotted, restored into a fresh context and snapshotted again.
const SNAPSHOTS: Record<string, string> = {
  data: `var prim = [1, -0, NaN, "s", "日本語", "a\\uD800", 10n ** 30n, -(2n ** 100n), true, null, undefined];
    var shared = { k: 1 }; var refs = { a: shared, b: shared, c: [shared] }; var cyc = { name: "cyc" }; cyc.self = cyc;
    var m = new Map([[1, "one"], [shared, cyc], ["m", null]]); m.set("self", m); var s = new Set([1, shared, s]);
    let lexical = { deep: [1, [2, [3]]] }; const constant = "fixed"; globalThis.assigned = [new Date(0), /re/g, new Error("e")];
    var sparse = [1, , 3]; sparse[4294967294] = "last"; var bare = Object.create(null); bare.__proto__ = "own";
    var p = JSON.parse('{"__proto__": 1}'); var odd = { 4294967295: 1, "-0": 2, 7: 3 };`,
  typedArrays: `var buf = new ArrayBuffer(80); new Uint8Array(buf).forEach((_, i, a) => { a[i] = 255 - i; });
    var views = [new Int8Array(buf, 1, 3), new Uint8Array(buf, 2, 4), new Uint8ClampedArray(buf, 3, 2), new Int16Array(buf, 4, 3),
      new Uint16Array(buf, 6, 2), new Int32Array(buf, 8, 2), new Uint32Array(buf, 12, 1), new Float32Array(buf, 16, 2),
      new Float64Array(buf, 24, 2), new BigInt64Array(buf, 40, 1), new BigUint64Array(buf, 48, 1), new Float16Array(buf, 56, 4)];
    var dv = new DataView(buf, 5, 9); var lone = new Float64Array([0.5, -0]); var whole = buf;`,
  functionsAndClasses: `function add(a, b) { return a + b; } add.meta = { calls: 0 }; add.prototype.shared = 1;
    const arrow = (x) => x * 2; async function later() { return 1; } function* gen() { yield 1; }
    class Base { constructor(x) { this.x = x; } get twice() { return this.x * 2; } static make() { return new Base(1); } }
    class Derived extends Base { static tag = "d"; method() { return super.twice; } }
    let instance = new Derived(3); instance.extra = [instance]; var proto = Derived.prototype; var ctorRef = Base;
    var obj = { method() { return 1; }, get value() { return 2; }, set value(v) {}, arrow: () => 3 };
    var withAccessor = {}; Object.defineProperty(withAccessor, "a", { get: function getA() { return 1; }, enumerable: true });
    Object.defineProperty(globalThis, "hiddenGlobal", { value: 5, enumerable: false, writable: false, configurable: true });`,
  placeholders: `function outer() { let secret = 1; return function inner() { return secret; }; } var closure = outer();
    var sym = Symbol("s"); var prox = new Proxy({}, {}); var prom = Promise.resolve(1); var wm = new WeakMap();
    var gen = (function* () { yield 1; })(); class P { #priv = 1; } var priv = new P(); var native = Math.max;
    var holder = { fine: 1, bad: closure, list: [1, closure, 3], m: new Map([[1, closure]]) };
    var acc = {}; Object.defineProperty(acc, "lost", { get: outer(), enumerable: true });`,
};

describe("the snapshot writer and reader keep their bytes", () => {
  for (const [name, setup] of Object.entries(SNAPSHOTS)) {
    it(`snapshots ${name}, restores it and snapshots it again`, () => {
      const first = handle();
      run(first, `${setup}\n;undefined`);
      requestSnapshot(JobKind.WriteSnapshot, 0, 0, 64 << 20);
      const written = first.writeSnapshot([]);
      if (written === "BUSY") throw new Error("busy");
      const [status, body, notRestored] = written;
      expect(status, String(body)).toBe(0);
      pin(`snapshot/${name}`, body as Buffer);
      pin(`snapshot/${name}/notRestored`, JSON.stringify(notRestored));

      const second = handle();
      requestSnapshot(JobKind.ReadSnapshot, 0, BUDGET_MS, 0);
      const read = second.readSnapshot(body as Buffer);
      if (read === "BUSY") throw new Error("busy");
      pin(`restore/${name}`, JSON.stringify(read));
      requestSnapshot(JobKind.WriteSnapshot, 0, 0, 64 << 20);
      const again = second.writeSnapshot([]);
      if (again === "BUSY") throw new Error("busy");
      expect(again[0], String(again[1])).toBe(0);
      pin(`resnapshot/${name}`, again[1] as Buffer);
      pin(`resnapshot/${name}/notRestored`, JSON.stringify(again[2]));
    });
  }
});

describe("the digests file", () => {
  it("lists exactly the cases this file pins", () => {
    if (UPDATE) {
      writeFileSync(FIXTURE, `${JSON.stringify(actual, null, 2)}\n`);
      return;
    }
    expect(Object.keys(actual).sort()).toEqual(Object.keys(expected).sort());
  });
});
