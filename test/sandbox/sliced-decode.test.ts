// A value decoded a slice at a time (src/marshal.ts ValueDecoder, src/decode-queue.ts) is the
// value decoded in one go: same shapes, same shared references and cycles, same own `__proto__`
// keys, same errors at the same byte, whatever the budget of each slice.
import { describe, expect, it } from "vitest";
import { DECODE_SLICE_WORK, DecodeQueue } from "../../src/decode-queue.js";
import { ConsoleDecoder, ValueDecoder, decodeConsole, decodeValue, encodeValue } from "../../src/marshal.js";
import { Sandbox, SandboxError } from "../../src/index.js";

const LIMITS = { maxDepth: 512, maxBytes: 1 << 30 };
const BUDGETS = [1, 2, 3, 7, 64, 1000];

/** Decodes with `advance(budget)` called until done; also counts the calls. */
function decodeSliced(bytes: Buffer, budget: number): { value: unknown; slices: number } {
  const decoder = new ValueDecoder(bytes);
  let slices = 1;
  while (!decoder.advance(budget)) slices++;
  return { value: decoder.value, slices };
}

/**
 * Asserts `b` is a copy of `a` with the same graph: same prototypes, own keys in order, values,
 * and the same sharing (two references to one object in `a` are two references to one object in
 * `b`, and distinct objects stay distinct).
 */
function expectSameGraph(
  a: unknown,
  b: unknown,
  forward = new Map<object, unknown>(),
  backward = new Map<unknown, object>(),
): void {
  if (typeof a !== "object" || a === null) {
    if (typeof a === "function") throw new Error("functions do not cross");
    expect(Object.is(a, b), `${String(a)} vs ${String(b)}`).toBe(true);
    return;
  }
  expect(typeof b).toBe("object");
  if (forward.has(a)) {
    expect(forward.get(a)).toBe(b);
    return;
  }
  expect(backward.has(b), "one copy stands for two distinct objects").toBe(false);
  forward.set(a, b);
  backward.set(b, a);
  const o = b as object;
  expect(Object.getPrototypeOf(o)).toBe(Object.getPrototypeOf(a));
  if (a instanceof Date) expect((o as Date).getTime()).toBe(a.getTime());
  if (a instanceof RegExp) expect([(o as RegExp).source, (o as RegExp).flags]).toEqual([a.source, a.flags]);
  if (a instanceof Error)
    expect([(o as Error).name, (o as Error).message, (o as Error).stack]).toEqual([a.name, a.message, a.stack]);
  if (a instanceof ArrayBuffer) expect(Buffer.from(o as ArrayBuffer).equals(Buffer.from(a))).toBe(true);
  if (ArrayBuffer.isView(a)) {
    const v = o as ArrayBufferView;
    expect([v.byteOffset, v.byteLength]).toEqual([a.byteOffset, a.byteLength]);
    expectSameGraph(a.buffer, v.buffer, forward, backward);
  }
  if (a instanceof Map) {
    const entries = [...(o as Map<unknown, unknown>)];
    expect(entries.length).toBe(a.size);
    [...a].forEach(([k, v], i) => {
      expectSameGraph(k, entries[i]![0], forward, backward);
      expectSameGraph(v, entries[i]![1], forward, backward);
    });
  }
  if (a instanceof Set) {
    const items = [...(o as Set<unknown>)];
    expect(items.length).toBe(a.size);
    for (const [i, v] of [...a].entries()) expectSameGraph(v, items[i], forward, backward);
  }
  if (ArrayBuffer.isView(a) || a instanceof Error) return; // indices and the engine's own properties
  expect(Reflect.ownKeys(o)).toEqual(Reflect.ownKeys(a));
  for (const key of Reflect.ownKeys(a)) {
    const da = Object.getOwnPropertyDescriptor(a, key)!;
    const db = Object.getOwnPropertyDescriptor(o, key)!;
    expect([db.enumerable, db.writable, db.configurable]).toEqual([da.enumerable, da.writable, da.configurable]);
    expectSameGraph(da.value, db.value, forward, backward);
  }
}

function shapes(): Record<string, unknown> {
  const shared = { s: "shared" };
  const cycle: Record<string, unknown> = { name: "cycle" };
  cycle.self = cycle;
  cycle.list = [cycle, shared, shared];
  const withProto = JSON.parse('{"__proto__": {"polluted": true}, "x": 1}') as object;
  const buffer = new ArrayBuffer(32);
  const bytes = new Uint8Array(buffer);
  for (let i = 0; i < bytes.length; i++) bytes[i] = i * 7;
  const sparse: unknown[] = [];
  sparse[5] = "five";
  sparse.length = 10;
  const nullProto = Object.assign(Object.create(null) as object, { a: 1, b: [2] });
  // A host error crosses without its stack (it would name server paths); the decoders then give it
  // `name: message`, so the shapes carry exactly that.
  const stackless = <E extends Error>(e: E): E => Object.assign(e, { stack: `${e.name}: ${e.message}` });
  return {
    scalars: [
      undefined,
      null,
      true,
      false,
      0,
      -0,
      1.5,
      NaN,
      -Infinity,
      2 ** 31,
      -(2 ** 31),
      "",
      "latin1 é",
      "utf16 € \ud83d\ude00",
      "lone \ud800",
    ],
    bigints: [0n, 1n, -1n, 2n ** 200n, -(3n ** 500n)],
    shared: [shared, shared, { shared }],
    cycle,
    withProto,
    nullProto,
    sparse,
    dates: [new Date(0), new Date(8.64e15), new Date(NaN)],
    regexps: [/a+b/gi, /\u{1F600}/u, /x/y],
    maps: new Map<unknown, unknown>([
      [shared, 1],
      ["k", shared],
      [2n, new Map([[1, 2]])],
      [NaN, -0],
    ]),
    sets: new Set<unknown>([shared, 1, "a", new Set([cycle])]),
    buffers: [
      buffer,
      new Uint8Array(buffer, 4, 8),
      new Float64Array(buffer, 8, 2),
      new DataView(buffer, 1, 3),
      new BigInt64Array(buffer, 16, 2),
    ],
    ownBuffers: [new Int16Array([1, -2, 3]), new Uint8ClampedArray([300 % 256, 7])],
    errors: [
      stackless(new RangeError("out of range")),
      stackless(new TypeError("bad type")),
      stackless(Object.assign(new Error("with name"), { name: "CustomError" })),
    ],
    longText: "z".repeat(600_000), // copied over several steps
    longUtf16: "\ud83d\ude00é".repeat(100_000),
    longBuffer: new Uint8Array(700_000).map((_, i) => i % 251),
    deep: Array.from({ length: 400 }).reduce<unknown>((inner) => [inner], "bottom"),
    wide: Object.fromEntries(Array.from({ length: 3000 }, (_, i) => [`k${i}`, i % 3 === 0 ? shared : i])),
  };
}

describe("a value decoded a slice at a time", () => {
  for (const [name, value] of Object.entries(shapes())) {
    it(`equals the one-shot decode: ${name}`, () => {
      const bytes = encodeValue(value, LIMITS);
      const once = decodeValue(bytes);
      expectSameGraph(value, once);
      for (const budget of BUDGETS) expectSameGraph(once, decodeSliced(bytes, budget).value);
    });
  }

  it("takes more slices for more work, and one slice for a value within the budget", () => {
    const small = encodeValue({ a: [1, 2, 3], b: "text" });
    expect(decodeSliced(small, DECODE_SLICE_WORK).slices).toBe(1);
    const keys = 100_000;
    const big = encodeValue(Object.fromEntries(Array.from({ length: keys }, (_, i) => [`k${i}`, i])), LIMITS);
    // Each property is a key and a value: at least two units of work.
    expect(decodeSliced(big, DECODE_SLICE_WORK).slices).toBeGreaterThanOrEqual((2 * keys) / DECODE_SLICE_WORK);
  });

  it("fails with the same error at every truncation point", () => {
    const bytes = encodeValue(shapes().cycle, LIMITS);
    for (let end = 0; end < bytes.length; end++) {
      const cut = bytes.subarray(0, end);
      let once: unknown;
      try {
        decodeValue(cut);
      } catch (err) {
        once = err;
      }
      expect(once).toBeInstanceOf(SandboxError);
      for (const budget of [1, 5]) expect(() => decodeSliced(cut, budget)).toThrow((once as Error).message);
    }
  });

  it("keeps trailing-byte and host refusal errors", () => {
    const trailing = Buffer.concat([encodeValue(1), Buffer.from([0])]);
    expect(() => decodeSliced(trailing, 1)).toThrow("trailing bytes");
    // A RegExp valid in QuickJS but not in V8, as the guest encodes it.
    const regexp = encodeValue(/a/);
    const source = Buffer.from("(?i:a)b", "latin1");
    const bad = Buffer.concat([
      regexp.subarray(0, 1),
      Buffer.from([0x14, source.length, 0, 0, 0]),
      source,
      regexp.subarray(regexp.length - 5),
    ]);
    expect(() => decodeValue(bad)).toThrow("valid in the sandbox but not in this Node.js version");
    expect(() => decodeSliced(bad, 1)).toThrow("valid in the sandbox but not in this Node.js version");
  });

  it("decodes console records in slices like at once", () => {
    const record = (level: number, args: unknown[]): Buffer => {
      const body = encodeValue(args, LIMITS);
      const head = Buffer.alloc(5);
      head[0] = level;
      head.writeUInt32LE(body.length, 1);
      return Buffer.concat([head, body]);
    };
    const bytes = Buffer.concat([
      record(0, ["a", 1]),
      record(2, [shapes().cycle]),
      record(
        4,
        Array.from({ length: 500 }, (_, i) => ({ i })),
      ),
    ]);
    const once = decodeConsole(bytes);
    const decoder = new ConsoleDecoder(bytes);
    while (!decoder.advance(3));
    expectSameGraph(once, decoder.value);
    expect(once.map((r) => r.level)).toEqual([0, 2, 4]);
  });
});

describe("the decode queue", () => {
  const bigBytes = encodeValue(
    Array.from({ length: 20_000 }, (_, i) => ({ i })),
    LIMITS,
  );

  it("hands values on in the order they were pushed, a small one at once when nothing waits", async () => {
    const queue = new DecodeQueue();
    const order: string[] = [];
    expect(
      queue.push(
        new ValueDecoder(encodeValue("first")),
        (v) => order.push(v as string),
        () => {},
      ),
    ).toBe(true);
    expect(
      queue.push(
        new ValueDecoder(bigBytes),
        () => order.push("big"),
        () => {},
      ),
    ).toBe(false);
    expect(
      queue.push(
        new ValueDecoder(encodeValue("after")),
        (v) => order.push(v as string),
        () => {},
      ),
    ).toBe(false);
    expect(order).toEqual(["first"]);
    await queue.drained();
    expect(order).toEqual(["first", "big", "after"]);
    expect(queue.drained()).toBeUndefined();
  });

  it("finishes everything queued at once on flush", () => {
    const queue = new DecodeQueue();
    const order: string[] = [];
    queue.push(
      new ValueDecoder(bigBytes),
      () => order.push("big"),
      () => {},
    );
    queue.push(
      new ValueDecoder(encodeValue("after")),
      (v) => order.push(v as string),
      () => {},
    );
    queue.flush();
    expect(order).toEqual(["big", "after"]);
  });

  it("fails what is queued, and what comes later, with the cancellation's error", async () => {
    const queue = new DecodeQueue();
    const failures: string[] = [];
    const disposed = new SandboxError("DISPOSED", "the sandbox was disposed");
    queue.push(
      new ValueDecoder(bigBytes),
      () => failures.push("used"),
      (err) => failures.push(err.code),
    );
    queue.cancel(() => disposed);
    expect(
      queue.push(
        new ValueDecoder(encodeValue(1)),
        () => failures.push("used"),
        (err) => failures.push(err.code),
      ),
    ).toBe(true);
    await expect(queue.decode(new ValueDecoder(encodeValue(2)))).rejects.toBe(disposed);
    expect(failures).toEqual(["DISPOSED", "DISPOSED"]);
  });
});

describe("guest values through eval (sliced) and evalSync (at once)", () => {
  it("are the same graph, for guest-made shapes large enough to take many slices", async () => {
    using sb = new Sandbox();
    const code = `(() => {
      const shared = { s: 'shared' };
      const cycle = { name: 'cycle' }; cycle.self = cycle;
      const proto = JSON.parse('{"__proto__": {"x": 1}, "y": 2}');
      const err = new TypeError('guest'); err.extra = 1;
      const buffer = new ArrayBuffer(16);
      const one = () => ({
        shared, cycle, proto, err, big: 2n ** 300n, date: new Date(5), re: /g+/g,
        map: new Map([[shared, cycle]]), set: new Set([shared, 1]),
        views: [new Uint16Array(buffer, 2, 3), new DataView(buffer)], fresh: { n: Math.random() > 2 },
      });
      return Array.from({ length: 1500 }, one);
    })()`;
    const once = sb.evalSync(code);
    const sliced = await sb.eval(code);
    expectSameGraph(once, sliced);
  });
});
