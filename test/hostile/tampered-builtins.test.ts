/**
 * Guest code replaces the built-ins a naive copier would call (iterators, getters, toString,
 * Object.keys...). Copying values out of the sandbox and formatting its errors must not run any of
 * them: the codec reads built-in slots through the originals captured at start-up.
 */
import { afterEach, beforeEach, describe, expect, it } from "vitest";
import { type GuestOpaque, Sandbox, type SandboxError } from "../../src/index.js";

let sb: Sandbox;
beforeEach(() => {
  sb = new Sandbox();
});
afterEach(() => sb.dispose());

// Every replacement counts its calls and then spins: a copier that calls one either hangs into
// TIMEOUT or leaves a non-zero count behind. (Object.prototype.then is left alone: resolving a
// guest promise with an object looks it up by the language's rules, inside the guest's budget.)
const TAMPER = `
  globalThis.hits = 0;
  const trap = function () { hits++; while (true) {} };
  const getter = (obj, key) => Object.defineProperty(obj, key, { get: trap, set: trap, configurable: true });
  const TypedArrayProto = Object.getPrototypeOf(Uint8Array.prototype);
  Array.prototype[Symbol.iterator] = trap; Array.prototype.forEach = trap; Array.prototype.map = trap; Array.prototype.keys = trap;
  Map.prototype.forEach = trap; Map.prototype.entries = trap; Map.prototype[Symbol.iterator] = trap; Map.prototype.keys = trap; getter(Map.prototype, 'size');
  Set.prototype.forEach = trap; Set.prototype.values = trap; Set.prototype[Symbol.iterator] = trap; getter(Set.prototype, 'size');
  getter(RegExp.prototype, 'flags'); getter(RegExp.prototype, 'source'); getter(RegExp.prototype, 'global');
  getter(Error.prototype, 'name'); getter(Error.prototype, 'message'); getter(Error.prototype, 'stack'); getter(TypeError.prototype, 'name');
  getter(TypedArrayProto, 'length'); getter(TypedArrayProto, 'buffer'); getter(TypedArrayProto, 'byteOffset'); getter(TypedArrayProto, 'byteLength');
  getter(ArrayBuffer.prototype, 'byteLength');
  Date.prototype.getTime = trap; Date.prototype.valueOf = trap; Date.prototype[Symbol.toPrimitive] = trap; Date.prototype.toISOString = trap;
  Object.keys = trap; Object.entries = trap; Object.getOwnPropertyNames = trap; Object.getPrototypeOf = trap; Object.getOwnPropertyDescriptor = trap;
  Reflect.ownKeys = trap; Reflect.get = trap; Reflect.getPrototypeOf = trap; Array.isArray = trap;
  Function.prototype.toString = trap; Symbol.prototype.toString = trap; BigInt.prototype.toString = trap; Number.prototype.toString = trap;
  String.prototype.toString = trap; Object.prototype.toString = trap; Object.prototype.toJSON = trap; Object.prototype.valueOf = trap;
  getter(Object.prototype, 'constructor'); getter(Object.prototype, '__proto__');
  JSON.stringify = trap; String = trap;
  0`;

function codeOf(fn: () => unknown): string {
  try {
    fn();
  } catch (err) {
    return (err as SandboxError).code;
  }
  return "no error";
}

describe("copying out ignores tampered built-ins", () => {
  it("copies every value class built before the tampering, running nothing", () => {
    sb.evalSync(`globalThis.v = { a: [1, , 3], m: new Map([[1, { x: 2 }]]), s: new Set(['k']), r: /x+/gi, e: new TypeError('bad'),
      t: new Uint16Array([1, 2, 3]), ab: new Uint8Array([7]).buffer, d: new Date(5), b: 5n, n: -0, str: 'ok' }; 0`);
    sb.evalSync(TAMPER);
    const v = sb.evalSync("v", { timeoutMs: 1000 }) as Record<string, unknown>;
    // eslint-disable-next-line no-sparse-arrays
    expect(v.a).toStrictEqual([1, , 3]);
    expect([...(v.m as Map<number, unknown>)]).toEqual([[1, { x: 2 }]]);
    expect([...(v.s as Set<string>)]).toEqual(["k"]);
    expect(String(v.r)).toBe("/x+/gi");
    // The tampered name accessor is not run; the codec may fall back to the base name.
    expect(["TypeError", "Error"]).toContain((v.e as Error).name);
    expect((v.e as Error).message).toBe("bad");
    expect([...(v.t as Uint16Array)]).toEqual([1, 2, 3]);
    expect(new Uint8Array(v.ab as ArrayBuffer)[0]).toBe(7);
    expect((v.d as Date).getTime()).toBe(5);
    expect(v.b).toBe(5n);
    expect(Object.is(v.n, -0)).toBe(true);
    expect(v.str).toBe("ok");
    expect(sb.evalSync("hits")).toBe(0);
  });

  it("describes functions and symbols without calling their toString", () => {
    sb.evalSync("globalThis.w = [function named() {}, Symbol('s')]; 0");
    sb.evalSync(TAMPER);
    const w = sb.evalSync("w", { timeoutMs: 1000, unserializable: "describe" }) as GuestOpaque[];
    expect(w.map((x) => x.kind)).toEqual(["function", "symbol"]);
    expect(w[0]!.name).toBe("named");
    expect(sb.evalSync("hits")).toBe(0);
  });

  it("reports a thrown Error without calling its tampered accessors", () => {
    sb.evalSync("globalThis.err = new RangeError('kept'); 0");
    sb.evalSync(TAMPER);
    let caught: unknown;
    try {
      sb.evalSync("throw err", { timeoutMs: 1000 });
    } catch (e) {
      caught = e;
    }
    expect((caught as SandboxError).code).toBe("GUEST_ERROR");
    expect((caught as SandboxError).guest).toMatchObject({ name: "RangeError", message: "kept" });
    expect(sb.evalSync("hits")).toBe(0);
  });

  it("copies host values in and calls host functions without running tampered built-ins", async () => {
    sb.defineFunction("echo", (x) => x);
    sb.defineAsyncFunction("echoAsync", async ([x]) => x);
    sb.evalSync(TAMPER);
    sb.setGlobal("fromHost", {
      list: [1, 2],
      m: new Map([["k", 1]]),
      s: new Set([1]),
      d: new Date(3),
      e: new Error("e"),
      t: new Int8Array([1]),
    });
    expect(sb.evalSync("echo(fromHost) !== fromHost && hits === 0")).toBe(true);
    expect(await sb.eval("const back = await echoAsync(fromHost); back !== fromHost && hits === 0")).toBe(true);
    expect(sb.getGlobal("fromHost")).toMatchObject({ list: [1, 2] });
  });

  it("settles async host calls even when the guest replaced Promise.prototype.then", async () => {
    sb.defineAsyncFunction("later", async ([x]) => x);
    const outcome = await sb
      .eval(
        "Promise.prototype.then = function () { hits++; while (true) {} }; globalThis.hits = 0; const v = await later(9); [v, hits]",
        { timeoutMs: 1000 },
      )
      .catch((e: SandboxError) => e.code);
    // Either the await ignores the replaced `then` or the guest's own trap spins into TIMEOUT; never a hang.
    expect([[9, 0], "TIMEOUT"]).toContainEqual(outcome);
    expect(await sb.eval("1+1")).toBe(2);
  });

  it("keeps the sandbox usable after its built-ins were tampered with", () => {
    sb.evalSync(TAMPER);
    expect(codeOf(() => sb.evalSync("[1].forEach(() => {})", { timeoutMs: 100 }))).toBe("TIMEOUT");
    expect(sb.evalSync("40 + 2")).toBe(42);
  });
});
