// Hazard: a view (Buffer, typed array, DataView) is a window on a larger buffer. A small Node
// Buffer is a slice of Node's shared 8 KiB pool, so copying `view.buffer` whole would show the
// guest other Buffers' bytes: host secrets. Every view crosses with exactly its own bytes, in
// every bridge; views share a buffer on the other side only when the value passed that buffer.
import { describe, expect, it } from "vitest";
import { Sandbox } from "../../src/index.js";
import { sandbox } from "./harness.js";

const SECRET = "SECRET-in-the-pool";

/** A pooled Buffer next to a secret in the same pool slab. */
function pooledHi(): Buffer {
  const secret = Buffer.from(SECRET);
  const hi = Buffer.from("hi");
  // Both live in the shared pool: the hazard exists only if `hi.buffer` is larger than `hi`.
  expect(hi.buffer.byteLength).toBeGreaterThan(hi.length);
  expect(secret.buffer).toBe(hi.buffer);
  return hi;
}

// What the guest can reach through the received view: its length, its buffer's size, and
// whether the buffer's text contains the secret.
const PROBE = `(v) => {
  const all = String.fromCharCode(...new Uint8Array(v.buffer));
  return { length: v.byteLength, offset: v.byteOffset, buffer: v.buffer.byteLength, text: all, leaked: all.includes(${JSON.stringify(SECRET.slice(0, 6))}) };
}`;

describe("a view crosses into the guest with exactly its own bytes", () => {
  it("through a sync host function's result", () => {
    const sb = sandbox();
    sb.defineFunction("bytes", () => pooledHi());
    expect(sb.evalSync(`(${PROBE})(bytes())`)).toEqual({ length: 2, offset: 0, buffer: 2, text: "hi", leaked: false });
    expect(sb.evalSync("new Uint8Array(bytes().buffer).length")).toBe(2);
  });

  it("through an async host function's result", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("bytes", async () => pooledHi());
    expect(await sb.eval(`(${PROBE})(await bytes())`)).toEqual({
      length: 2,
      offset: 0,
      buffer: 2,
      text: "hi",
      leaked: false,
    });
  });

  it("through setGlobal, and then through a snapshot of that global", () => {
    const sb = sandbox();
    sb.setGlobal("given", { b: pooledHi() });
    expect(sb.evalSync(`(${PROBE})(given.b)`)).toEqual({ length: 2, offset: 0, buffer: 2, text: "hi", leaked: false });
    const { sandbox: restored } = Sandbox.restore(sb.snapshot());
    try {
      expect(restored.evalSync(`(${PROBE})(given.b)`)).toEqual({
        length: 2,
        offset: 0,
        buffer: 2,
        text: "hi",
        leaked: false,
      });
    } finally {
      restored.dispose();
    }
  });

  it("for typed-array slices and DataViews of a larger buffer", () => {
    const sb = sandbox();
    const backing = new ArrayBuffer(64);
    new Uint8Array(backing).fill(0x5a);
    new Uint8Array(backing, 8, 4).set([1, 2, 3, 4]);
    sb.setGlobal("views", { u16: new Uint16Array(backing, 8, 2), dv: new DataView(backing, 8, 4) });
    expect(
      sb.evalSync("[views.u16.buffer.byteLength, views.u16.byteOffset, [...new Uint8Array(views.u16.buffer)]]"),
    ).toEqual([4, 0, [1, 2, 3, 4]]);
    expect(sb.evalSync("[views.dv instanceof DataView, views.dv.buffer.byteLength, views.dv.getUint8(3)]")).toEqual([
      true,
      4,
      4,
    ]);
  });

  it("keeps two views sharing a buffer only when the host passes that buffer too", () => {
    const sb = sandbox();
    const backing = new ArrayBuffer(8);
    sb.setGlobal("withBuffer", [backing, new Uint8Array(backing, 2, 2), new Uint8Array(backing, 4, 2)]);
    expect(
      sb.evalSync("const [ab, a, b] = withBuffer; a[0] = 7; [a.buffer === ab, b.buffer === ab, new Uint8Array(ab)[2]]"),
    ).toEqual([true, true, 7]);
    sb.setGlobal("withoutBuffer", [new Uint8Array(backing, 2, 2), new Uint8Array(backing, 4, 2)]);
    expect(
      sb.evalSync("const [c, d] = withoutBuffer; [c.buffer === d.buffer, c.buffer.byteLength, d.buffer.byteLength]"),
    ).toEqual([false, 2, 2]);
  });
});

describe("a guest view crosses out with exactly its own bytes", () => {
  it("as a result and as a host-call argument", () => {
    const sb = sandbox();
    let seen: unknown;
    sb.defineFunction("take", (v) => {
      seen = v;
      return null;
    });
    const result = sb.evalSync(
      "const big = new Uint8Array(1024).fill(9); const v = big.subarray(100, 103); v.set([1, 2, 3]); take(v); v",
    ) as Uint8Array;
    for (const v of [result, seen as Uint8Array]) {
      expect(v).toBeInstanceOf(Uint8Array);
      expect([v.buffer.byteLength, v.byteOffset, [...v]]).toEqual([3, 0, [1, 2, 3]]);
    }
    const dv = sb.evalSync("new DataView(new ArrayBuffer(32), 4, 8)") as DataView;
    expect(dv).toBeInstanceOf(DataView);
    expect([dv.byteLength, dv.buffer.byteLength]).toEqual([8, 8]);
  });

  it("with the current length of a length-tracking view over a resized buffer", () => {
    const sb = sandbox();
    expect(
      sb.evalSync(
        "const rab = new ArrayBuffer(8, { maxByteLength: 16 }); const t = new Uint8Array(rab); rab.resize(4); t",
      ),
    ).toEqual(new Uint8Array(4));
    expect(
      sb.evalSync(
        "const rab2 = new ArrayBuffer(8, { maxByteLength: 16 }); const t2 = new Uint8Array(rab2); rab2.resize(12); t2",
      ),
    ).toEqual(new Uint8Array(12));
    // Out of bounds after the shrink: it reads as empty in JavaScript, and crosses as empty.
    expect(
      sb.evalSync(
        "const rab3 = new ArrayBuffer(8, { maxByteLength: 16 }); const t3 = new Uint8Array(rab3, 4); rab3.resize(2); t3",
      ),
    ).toEqual(new Uint8Array(0));
  });
});
