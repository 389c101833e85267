/**
 * The host's encoder: Node values -> the wire format (native/wire.h). Everything crosses by copy,
 * under the same caps the native decoder applies (the boundary table's copy limits), so a value
 * the sandbox would refuse is refused here first, with the real reason. The walk keeps its own
 * stack of unfinished containers, so an encoding can stop after a budget of work and go on later
 * (see {@link ValueEncoder}): a host-call result of tens of megabytes is encoded a slice per turn
 * of the event loop, not in one go on the Node main thread.
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

/**
 * Bytes of a string's characters per unit of work (as the decoder counts them): a string longer
 * than {@link STRING_PIECE_CHARS} is scanned and written a piece per step, each piece a few units.
 */
const BYTES_PER_WORK_UNIT = 128;
/** Characters of a long string scanned or written in one step (a SlicedString: no copy). */
const STRING_PIECE_CHARS = 64 * 1024;
const NOT_LATIN1 = /[^\u0000-\u00ff]/;

/** An unfinished container (or long string): each step writes its next parts. */
interface Frame {
  /**
   * Writes its next parts, until one of them leaves a frame of its own or the work reaches
   * `until`; false, having left no frame, once it has nothing more to write.
   */
  step(w: ValueEncoder, until: number): boolean;
}

class ArrayFrame implements Frame {
  #count = 0;
  constructor(
    private readonly v: unknown[],
    private readonly indices: Iterator<number>,
    private readonly depth: number,
    private readonly path: string,
    private readonly countAt: number,
  ) {}
  step(w: ValueEncoder, until: number): boolean {
    const frames = w.frameCount;
    for (;;) {
      const next = this.indices.next();
      if (next.done === true) {
        w.buf.writeUInt32LE(this.#count, this.countAt);
        return false;
      }
      const i = next.value;
      if (!Object.hasOwn(this.v, i)) continue;
      w.u32(i);
      this.#count++;
      w.value(this.v[i], this.depth + 1, `${this.path}[${i}]`);
      if (w.frameCount !== frames || w.work >= until) return true;
    }
  }
}

class ObjectFrame implements Frame {
  #at = 0;
  constructor(
    private readonly v: Record<string, unknown>,
    private readonly keys: string[],
    private readonly depth: number,
    private readonly path: string,
  ) {}
  step(w: ValueEncoder, until: number): boolean {
    const frames = w.frameCount;
    while (this.#at < this.keys.length) {
      const key = this.keys[this.#at++]!;
      w.string(key);
      w.value(this.v[key], this.depth + 1, `${this.path}.${key}`);
      if (w.frameCount !== frames || w.work >= until) return true;
    }
    return false;
  }
}

const NO_ITEM = Symbol("no item");

/**
 * A Map's entries or a Set's items, from the collection's own live iterator; their count, written
 * at `countAt` once they are all written, is what was written even when host code changed the
 * collection between two slices.
 */
class EntriesFrame implements Frame {
  #item: unknown = NO_ITEM; // a map entry's value, written once its key is
  #count = 0;
  constructor(
    private readonly entries: Iterator<unknown>,
    private readonly isMap: boolean,
    private readonly depth: number,
    private readonly path: string,
    private readonly countAt: number,
  ) {}
  step(w: ValueEncoder): boolean {
    if (this.#item !== NO_ITEM) {
      const item = this.#item;
      this.#item = NO_ITEM;
      w.value(item, this.depth + 1, `${this.path}.<map value>`);
      return true;
    }
    const next = this.entries.next();
    if (next.done === true) {
      w.buf.writeUInt32LE(this.#count, this.countAt);
      return false;
    }
    this.#count++;
    if (!this.isMap) {
      w.value(next.value, this.depth + 1, `${this.path}.<set entry>`);
      return true;
    }
    const [key, item] = next.value as [unknown, unknown];
    this.#item = item;
    w.value(key, this.depth + 1, `${this.path}.<map key>`);
    return true;
  }
}

/** Strings written one after another (any of them may be long), then an optional tag. */
class TextsFrame implements Frame {
  #at = 0;
  constructor(
    private readonly texts: readonly string[],
    private readonly endTag?: number,
  ) {}
  step(w: ValueEncoder): boolean {
    if (this.#at < this.texts.length) {
      w.string(this.texts[this.#at++]!);
      return true;
    }
    if (this.#at++ > this.texts.length || this.endTag === undefined) return false;
    w.u8(this.endTag);
    return true;
  }
}

/** A string past {@link STRING_PIECE_CHARS}: scanned for its width a piece per step, then written a piece per step. */
class StringFrame implements Frame {
  #scanned = 0;
  #written = -1; // -1: still scanning
  #latin1 = true;
  constructor(private readonly s: string) {}
  step(w: ValueEncoder): boolean {
    const s = this.s;
    if (this.#written < 0) {
      if (this.#latin1 && this.#scanned < s.length) {
        const piece = s.slice(this.#scanned, this.#scanned + STRING_PIECE_CHARS);
        this.#latin1 = !NOT_LATIN1.test(piece);
        this.#scanned += piece.length;
        w.work += (piece.length / BYTES_PER_WORK_UNIT) | 0;
        return true;
      }
      w.stringHeader(s.length, this.#latin1);
      this.#written = 0;
      return true;
    }
    if (this.#written >= s.length) return false;
    const piece = s.slice(this.#written, this.#written + STRING_PIECE_CHARS);
    w.stringPiece(piece, this.#latin1);
    this.#written += piece.length;
    w.work += (piece.length / BYTES_PER_WORK_UNIT) | 0;
    return true;
  }
}

/**
 * One value's encoding, resumable as {@link ValueDecoder}'s decoding is: {@link ValueEncoder.advance}
 * writes until done or until a budget of work is spent. Host code that runs between two slices (a
 * getter, or anything on another turn of the event loop) may change what is still to be written;
 * the result is then some consistent encoding under the same caps, never a malformed one.
 */
export class ValueEncoder {
  pos = 0;
  /** Work done so far: one unit per value, and one per {@link BYTES_PER_WORK_UNIT} bytes of text. */
  work = 0;
  private ids: Map<object, number> | undefined; // created on the first object: most host call values are scalars
  private nextId = 0; // object numbers, as the decoders count them (a view's private copy of its bytes takes one)
  private nodesLeft: number;
  private readonly frames: Frame[] = [];

  constructor(
    value: unknown,
    private readonly limits: CopyLimits,
    public buf: Buffer = Buffer.allocUnsafe(256),
  ) {
    this.nodesLeft = limits.maxNodes ?? COPY_LIMITS.maxNodes;
    this.value(value, 0, "");
  }

  /** Encodes until done (true) or until about `budget` more units of work are spent (false). Throws `SandboxError`. */
  advance(budget: number): boolean {
    const until = this.work + budget;
    const frames = this.frames;
    while (frames.length > 0) {
      if (this.work >= until) return false;
      if (!frames[frames.length - 1]!.step(this, until)) frames.pop();
    }
    return true;
  }

  /** Containers (and long strings) begun and not yet finished. */
  get frameCount(): number {
    return this.frames.length;
  }

  /** The encoded bytes, once {@link ValueEncoder.advance} returned true (a view of `buf`). */
  bytes(): Buffer {
    return this.buf.subarray(0, this.pos);
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
    if (s.length > STRING_PIECE_CHARS) {
      this.frames.push(new StringFrame(s));
      return;
    }
    const latin1 = !NOT_LATIN1.test(s);
    this.stringHeader(s.length, latin1);
    this.stringPiece(s, latin1);
  }
  /** A string's tag and length, with room for its characters: one byte per unit when every unit is below 256, as native/wire.h does. */
  stringHeader(length: number, latin1: boolean): void {
    this.ensure(5 + (latin1 ? length : length * 2));
    this.buf[this.pos] = latin1 ? Tag.Latin1 : Tag.String;
    this.buf.writeUInt32LE(length, this.pos + 1);
    this.pos += 5;
  }
  /** Characters of the string whose header was written, in its width. */
  stringPiece(s: string, latin1: boolean): void {
    if (latin1) {
      this.buf.write(s, this.pos, s.length, "latin1");
      this.pos += s.length;
    } else {
      this.buf.write(s, this.pos, s.length * 2, "utf16le");
      this.pos += s.length * 2;
    }
  }

  value(v: unknown, depth: number, path: string): void {
    if (--this.nodesLeft < 0)
      throw unserializable(`the value has more than ${this.limits.maxNodes ?? COPY_LIMITS.maxNodes} parts`, path);
    this.work++;
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

  // Writes what comes before an object's parts and, for a container, leaves a frame to write them.
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
      this.frames.push(new TextsFrame([v.source, v.flags]));
      return;
    }
    if (v instanceof Map) {
      this.u8(Tag.Map);
      this.u32(v.size);
      this.frames.push(new EntriesFrame(v.entries(), true, depth, path, this.pos - 4));
      return;
    }
    if (v instanceof Set) {
      this.u8(Tag.Set);
      this.u32(v.size);
      this.frames.push(new EntriesFrame(v.values(), false, depth, path, this.pos - 4));
      return;
    }
    if (v instanceof ArrayBuffer) {
      this.u8(Tag.ArrayBuffer);
      this.u32(v.byteLength);
      this.ensure(v.byteLength);
      this.buf.set(new Uint8Array(v), this.pos);
      this.pos += v.byteLength;
      this.work += (v.byteLength / BYTES_PER_WORK_UNIT) | 0;
      return;
    }
    if (ArrayBuffer.isView(v)) return this.view(v, path);
    if (v instanceof Error) {
      this.u8(Tag.Error);
      const name = typeof v.name === "string" ? v.name : "Error";
      // No stack, as for a thrown host error: the host's holds server paths; the guest makes its own.
      this.frames.push(new TextsFrame([name, typeof v.message === "string" ? v.message : ""], Tag.Undefined));
      return;
    }
    if (v instanceof SharedArrayBuffer) throw unserializable("a SharedArrayBuffer cannot be copied", path);
    const keys = Object.keys(v);
    this.u8(Tag.Object);
    this.u8(Object.getPrototypeOf(v) === null ? 1 : 0);
    this.u32(keys.length);
    this.frames.push(new ObjectFrame(v as Record<string, unknown>, keys, depth, path));
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
    this.work += (byteLength / BYTES_PER_WORK_UNIT) | 0;
    this.u32(0);
    return this.u32(length);
  }

  private array(v: unknown[], depth: number, path: string): void {
    this.u8(Tag.Array);
    this.u32(v.length);
    const countAt = this.pos;
    this.u32(0);
    // Walk indices for dense arrays; only the present keys for sparse ones (length up to 2^32-1).
    const indices: Iterator<number> =
      v.length <= 1 << 20 ? v.keys() : Object.keys(v).map(Number).filter(Number.isInteger).values();
    this.frames.push(new ArrayFrame(v, indices, depth, path, countAt));
  }
}

/** Encodes a host value for the sandbox. Throws `UNSERIALIZABLE` for what cannot be copied. */
export function encodeValue(value: unknown, limits: CopyLimits = COPY_LIMITS): Buffer {
  const w = new ValueEncoder(value, limits);
  w.advance(Number.POSITIVE_INFINITY);
  return w.bytes();
}

/** Units of work of one slice of {@link encodeValueInSlices}: about half a millisecond here, as a decode slice. */
export const ENCODE_SLICE_WORK = 2048;

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
  return encodeFirstSlice(value, target, limits, Number.POSITIVE_INFINITY) as number | Buffer;
}

/**
 * Like {@link encodeValueInto} when the value takes at most `sliceWork` units of work; else a promise
 * of its bytes (a buffer of their own, never `target`), encoded a slice of `sliceWork` units per
 * turn of the event loop. Host code may run between slices, so what is left of the value is
 * encoded as it is then.
 */
export function encodeValueInSlices(
  value: unknown,
  target: Buffer,
  sliceWork: number = ENCODE_SLICE_WORK,
  limits: CopyLimits = COPY_LIMITS,
): number | Buffer | Promise<Buffer> {
  const first = encodeFirstSlice(value, target, limits, sliceWork);
  return first instanceof ValueEncoder ? finishInSlices(first, sliceWork) : first;
}

async function finishInSlices(encoder: ValueEncoder, sliceWork: number): Promise<Buffer> {
  do await new Promise<void>((resolve) => setImmediate(resolve));
  while (!encoder.advance(sliceWork));
  return encoder.bytes();
}

// The bytes when the value took at most `sliceWork`, else the unfinished encoder, which writes into
// a buffer of its own: `target` may be written by anyone between two slices.
function encodeFirstSlice(
  value: unknown,
  target: Buffer,
  limits: CopyLimits,
  sliceWork: number,
): number | Buffer | ValueEncoder {
  if (typeof value !== "object" || value === null) {
    // Only text can take more than one slice (a BigInt is written as hex text).
    const mayPause =
      sliceWork !== Number.POSITIVE_INFINITY &&
      (typeof value === "bigint" || (typeof value === "string" && value.length > STRING_PIECE_CHARS));
    const w = new ValueEncoder(value, limits, mayPause ? undefined : target);
    if (!w.advance(sliceWork)) return w;
    return w.buf === target ? w.pos : w.bytes();
  }
  const owned = spare?.length === target.length ? spare : Buffer.allocUnsafe(target.length);
  spare = undefined;
  let finished = true;
  try {
    const w = new ValueEncoder(value, limits, owned);
    if (!w.advance(sliceWork)) {
      finished = false; // it keeps writing into `owned`
      return w;
    }
    const n = w.pos;
    if (w.buf !== owned) return w.bytes();
    // A loop for the usual few bytes: Buffer#copy is a call into C++ that costs ~200 ns.
    if (n <= SMALL_COPY_BYTES) for (let i = 0; i < n; i++) target[i] = owned[i]!;
    else owned.copy(target, 0, 0, n);
    return n;
  } finally {
    if (finished) spare = owned;
  }
}
