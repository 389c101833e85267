/**
 * The host's encoder: Node values -> the wire format (native/wire.h). Everything crosses by copy,
 * under the same caps the native decoder applies (the boundary table's copy limits), so a value
 * the sandbox would refuse is refused here first, with the real reason.
 */
import { SandboxError } from "./errors.js";
import { COPY_LIMITS, TypedKind } from "./native.js";
import { GuestOpaque, Tag, VIEW_CTORS } from "./wire.js";

/** Caps on one copied value. */
export interface CopyLimits {
  maxDepth: number;
  /** Values in all (the root, each element, property value, map key and entry...); the native decoder's cap when left out. */
  maxNodes?: number;
  maxBytes: number;
}

function unserializable(what: string, path: string): SandboxError {
  return new SandboxError("UNSERIALIZABLE", `${path ? `value at ${path}` : "value"}: ${what}`);
}

class Writer {
  pos = 0;
  private ids: Map<object, number> | undefined; // created on the first object: most host call values are scalars
  private nextId = 0; // object numbers, as the decoders count them (a view's private copy of its bytes takes one)
  private nodesLeft: number;

  constructor(
    private readonly limits: CopyLimits,
    public buf: Buffer = Buffer.allocUnsafe(256),
  ) {
    this.nodesLeft = limits.maxNodes ?? COPY_LIMITS.maxNodes;
  }

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    if (this.pos + n > this.limits.maxBytes)
      throw new SandboxError("UNSERIALIZABLE", `value is larger than ${this.limits.maxBytes} bytes`);
    let size = this.buf.length * 2;
    while (size < this.pos + n) size *= 2;
    const next = Buffer.allocUnsafe(size);
    this.buf.copy(next, 0, 0, this.pos);
    this.buf = next;
  }
  u8(v: number): void {
    this.ensure(1);
    this.buf[this.pos++] = v;
  }
  u32(v: number): void {
    this.ensure(4);
    this.buf.writeUInt32LE(v, this.pos);
    this.pos += 4;
  }
  string(s: string): void {
    // One byte per unit when every unit is below 256, as native/wire.h does.
    if (!/[^\u0000-\u00ff]/.test(s)) {
      this.ensure(5 + s.length);
      this.buf[this.pos] = Tag.Latin1;
      this.buf.writeUInt32LE(s.length, this.pos + 1);
      this.buf.write(s, this.pos + 5, s.length, "latin1");
      this.pos += 5 + s.length;
      return;
    }
    this.ensure(5 + s.length * 2);
    this.buf[this.pos] = Tag.String;
    this.buf.writeUInt32LE(s.length, this.pos + 1);
    this.buf.write(s, this.pos + 5, s.length * 2, "utf16le");
    this.pos += 5 + s.length * 2;
  }

  value(v: unknown, depth: number, path: string): void {
    if (--this.nodesLeft < 0)
      throw unserializable(`the value has more than ${this.limits.maxNodes ?? COPY_LIMITS.maxNodes} parts`, path);
    switch (typeof v) {
      case "undefined":
        return this.u8(Tag.Undefined);
      case "boolean":
        return this.u8(v ? Tag.True : Tag.False);
      case "number":
        if ((v | 0) === v && !Object.is(v, -0)) {
          this.ensure(5);
          this.buf[this.pos] = Tag.Int32;
          this.buf.writeInt32LE(v, this.pos + 1);
          this.pos += 5;
        } else {
          this.ensure(9);
          this.buf[this.pos] = Tag.Float64;
          this.buf.writeDoubleLE(v, this.pos + 1);
          this.pos += 9;
        }
        return;
      case "string":
        return this.string(v);
      case "bigint":
        // Hex, not decimal: linear both ways (decimal conversion of a large BigInt takes seconds).
        this.u8(Tag.BigIntHex);
        return this.string(v < 0n ? `-${(-v).toString(16)}` : v.toString(16));
      case "symbol":
        throw unserializable("a symbol cannot be copied into the sandbox", path);
      case "function":
        throw unserializable(`a function cannot be copied into the sandbox (use defineFunction to expose it)`, path);
    }
    if (v === null) return this.u8(Tag.Null);
    this.object(v as object, depth, path);
  }

  private object(v: object, depth: number, path: string): void {
    this.ids ??= new Map();
    const seen = this.ids.get(v);
    if (seen !== undefined) {
      this.u8(Tag.BackRef);
      return this.u32(seen);
    }
    if (depth >= this.limits.maxDepth) throw unserializable(`nested deeper than ${this.limits.maxDepth} levels`, path);
    if (v instanceof GuestOpaque)
      throw unserializable(`${v.toString()} came from the sandbox as a description and cannot go back`, path);
    if (v instanceof Promise) throw unserializable("a Promise cannot be copied; await it first", path);
    if (v instanceof WeakMap || v instanceof WeakSet || v instanceof WeakRef)
      throw unserializable("a weak collection cannot be copied", path);
    this.ids.set(v, this.nextId++);
    if (Array.isArray(v)) return this.array(v, depth, path);
    if (v instanceof Date) {
      this.u8(Tag.Date);
      this.ensure(8);
      this.buf.writeDoubleLE(v.getTime(), this.pos);
      this.pos += 8;
      return;
    }
    if (v instanceof RegExp) {
      this.u8(Tag.RegExp);
      this.string(v.source);
      return this.string(v.flags);
    }
    if (v instanceof Map) {
      this.u8(Tag.Map);
      this.u32(v.size);
      for (const [key, item] of v) {
        this.value(key, depth + 1, `${path}.<map key>`);
        this.value(item, depth + 1, `${path}.<map value>`);
      }
      return;
    }
    if (v instanceof Set) {
      this.u8(Tag.Set);
      this.u32(v.size);
      for (const item of v) this.value(item, depth + 1, `${path}.<set entry>`);
      return;
    }
    if (v instanceof ArrayBuffer) {
      this.u8(Tag.ArrayBuffer);
      this.u32(v.byteLength);
      this.ensure(v.byteLength);
      this.buf.set(new Uint8Array(v), this.pos);
      this.pos += v.byteLength;
      return;
    }
    if (ArrayBuffer.isView(v)) return this.view(v, path);
    if (v instanceof Error) {
      this.u8(Tag.Error);
      this.string(typeof v.name === "string" ? v.name : "Error");
      this.string(typeof v.message === "string" ? v.message : "");
      // No stack, as for a thrown host error: the host's holds server paths; the guest makes its own.
      return this.u8(Tag.Undefined);
    }
    if (v instanceof SharedArrayBuffer) throw unserializable("a SharedArrayBuffer cannot be copied", path);
    const keys = Object.keys(v);
    this.u8(Tag.Object);
    this.u8(Object.getPrototypeOf(v) === null ? 1 : 0);
    this.u32(keys.length);
    for (const key of keys) {
      this.string(key);
      this.value((v as Record<string, unknown>)[key], depth + 1, `${path}.${key}`);
    }
  }

  // A view crosses with exactly its own bytes (a small Buffer is a window on Node's shared pool:
  // its `.buffer` holds other Buffers' data). It shares a buffer only with that buffer itself,
  // when the value passed it earlier.
  private view(v: ArrayBufferView, path: string): void {
    const kind = VIEW_CTORS.findIndex((c) => c !== undefined && v instanceof c);
    if (kind < 0) throw unserializable("this kind of view cannot be copied", path);
    const buffer = v.buffer;
    if (!(buffer instanceof ArrayBuffer)) throw unserializable("a view on a SharedArrayBuffer cannot be copied", path);
    // Its geometry, read once: a view whose resizable buffer shrank past it (or was detached)
    // throws on these reads (a DataView) or would read past its buffer's end.
    let byteOffset: number;
    let byteLength: number;
    let length: number;
    try {
      byteOffset = v.byteOffset;
      byteLength = v.byteLength;
      length = kind === TypedKind.DataView ? byteLength : (v as Uint8Array).length;
    } catch {
      byteOffset = byteLength = length = Number.NaN;
    }
    if (!(byteOffset + byteLength <= buffer.byteLength))
      throw unserializable("a view out of bounds of its buffer (shrunk or detached) cannot be copied", path);
    this.u8(Tag.TypedArray);
    this.u8(kind);
    const shared = this.ids!.get(buffer);
    if (shared !== undefined) {
      this.u8(Tag.BackRef);
      this.u32(shared);
      this.u32(byteOffset);
      return this.u32(length);
    }
    this.nextId++;
    this.u8(Tag.ArrayBuffer);
    this.u32(byteLength);
    this.ensure(byteLength);
    this.buf.set(new Uint8Array(buffer, byteOffset, byteLength), this.pos);
    this.pos += byteLength;
    this.u32(0);
    return this.u32(length);
  }

  private array(v: unknown[], depth: number, path: string): void {
    this.u8(Tag.Array);
    this.u32(v.length);
    const countAt = this.pos;
    this.u32(0);
    let count = 0;
    // Walk indices for dense arrays; only the present keys for sparse ones (length up to 2^32-1).
    const indices: Iterable<number> =
      v.length <= 1 << 20 ? v.keys() : Object.keys(v).map(Number).filter(Number.isInteger);
    for (const i of indices) {
      if (!Object.hasOwn(v, i)) continue;
      this.u32(i);
      this.value(v[i], depth + 1, `${path}[${i}]`);
      count++;
    }
    this.buf.writeUInt32LE(count, countAt);
  }
}

/** Encodes a host value for the sandbox. Throws `UNSERIALIZABLE` for what cannot be copied. */
export function encodeValue(value: unknown, limits: CopyLimits = COPY_LIMITS): Buffer {
  const w = new Writer(limits);
  w.value(value, 0, "");
  return w.buf.subarray(0, w.pos);
}

// Memory owned by one encoding at a time (see encodeValueInto): the outermost object encoding
// takes it, one that host code starts in the middle of it gets a buffer of its own.
let spare: Buffer | undefined;
const SMALL_COPY_BYTES = 128;

/**
 * Encodes into `target` when the value fits (returns the byte count), else into a new buffer.
 * Host calls use this with the exchange buffer every sandbox shares, so small values cost no
 * allocation. Reading an object can run host code (getters, Proxy traps, iterators) that calls
 * into another sandbox, which writes into that same buffer: objects are encoded into memory this
 * call owns and copied into `target` only once nothing can run any more. Other values run no code.
 */
export function encodeValueInto(value: unknown, target: Buffer, limits: CopyLimits = COPY_LIMITS): number | Buffer {
  if (typeof value !== "object" || value === null) {
    const w = new Writer(limits, target);
    w.value(value, 0, "");
    return w.buf === target ? w.pos : w.buf.subarray(0, w.pos);
  }
  const owned = spare?.length === target.length ? spare : Buffer.allocUnsafe(target.length);
  spare = undefined;
  try {
    const w = new Writer(limits, owned);
    w.value(value, 0, "");
    const n = w.pos;
    if (w.buf !== owned) return w.buf.subarray(0, n);
    // A loop for the usual few bytes: Buffer#copy is a call into C++ that costs ~200 ns.
    if (n <= SMALL_COPY_BYTES) for (let i = 0; i < n; i++) target[i] = owned[i]!;
    else owned.copy(target, 0, 0, n);
    return n;
  } finally {
    spare = owned;
  }
}
