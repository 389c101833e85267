/**
 * The host half of the boundary: Node values <-> the wire format that native/wire.h defines.
 * Everything crosses by copy. Objects built here are fresh; keys are defined as own data
 * properties, so a guest-supplied `__proto__` or `constructor` key cannot pollute anything.
 */
import { inspect } from "node:util";
import { SandboxError } from "./errors.js";

const enum Tag {
  Undefined = 0x00,
  Null = 0x01,
  False = 0x02,
  True = 0x03,
  Int32 = 0x04,
  Float64 = 0x05,
  String = 0x07,
  Array = 0x08,
  Object = 0x09,
  Date = 0x0a,
  RegExp = 0x0b,
  Map = 0x0c,
  Set = 0x0d,
  ArrayBuffer = 0x0e,
  TypedArray = 0x0f,
  Error = 0x10,
  BackRef = 0x11,
  Opaque = 0x12,
  Latin1 = 0x14,
  BigIntHex = 0x1a,
}

/** What a {@link GuestOpaque} stands for. */
export type GuestOpaqueKind = "function" | "symbol" | "accessor" | "proxy" | "promise" | "weak collection" | "object";

const OPAQUE_KINDS: readonly GuestOpaqueKind[] = ["function", "symbol", "accessor", "proxy", "promise", "weak collection", "object"];

/**
 * A guest value that cannot be copied (a function, symbol, accessor, Proxy, promise...), described
 * instead. Produced only with `unserializable: "describe"` and in console output.
 */
export class GuestOpaque {
  constructor(
    /** What the guest value was. */
    readonly kind: GuestOpaqueKind,
    /** Function name or symbol description, where there is one. */
    readonly name?: string,
  ) {
    Object.freeze(this);
  }

  /** How the value reads in output: `[Function name]`, `[Getter]`, `Promise`... */
  toString(): string {
    switch (this.kind) {
      case "function": return `[Function ${this.name || "(anonymous)"}]`;
      case "symbol": return `Symbol(${this.name ?? ""})`;
      case "accessor": return "[Getter/Setter]";
      case "proxy": return "[Proxy]";
      case "promise": return "Promise {}";
      case "weak collection": return "[WeakMap/WeakSet/WeakRef]";
      default: return "[object]";
    }
  }

  [inspect.custom](): string {
    return this.toString();
  }
}

const TYPED_CTORS = [
  Int8Array, Uint8Array, Uint8ClampedArray, Int16Array, Uint16Array, Int32Array, Uint32Array,
  Float32Array, Float64Array, BigInt64Array, BigUint64Array,
] as const;
type TypedArray = InstanceType<(typeof TYPED_CTORS)[number]>;
const FLOAT16_KIND = 11;
const DATAVIEW_KIND = 12;
const float16Ctor = (globalThis as { Float16Array?: new (b: ArrayBuffer, o: number, l: number) => unknown }).Float16Array;

const ERROR_CTORS: Record<string, ErrorConstructor> = {
  Error, TypeError, RangeError, SyntaxError, ReferenceError, EvalError, URIError,
};

/** Caps on one copied value. */
export interface CopyLimits {
  maxDepth: number;
  maxBytes: number;
}

const DEFAULT_LIMITS: CopyLimits = { maxDepth: 512, maxBytes: 256 * 1024 * 1024 };

function unserializable(what: string, path: string): SandboxError {
  return new SandboxError("UNSERIALIZABLE", `${path ? `value at ${path}` : "value"}: ${what}`);
}

class Writer {
  pos = 0;
  private ids: Map<object, number> | undefined; // created on the first object: most host call values are scalars
  private nextId = 0; // object numbers, as the decoders count them (a view's private copy of its bytes takes one)

  constructor(
    private readonly limits: CopyLimits,
    public buf: Buffer = Buffer.allocUnsafe(256),
  ) {}

  private ensure(n: number): void {
    if (this.pos + n <= this.buf.length) return;
    if (this.pos + n > this.limits.maxBytes) throw new SandboxError("UNSERIALIZABLE", `value is larger than ${this.limits.maxBytes} bytes`);
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
    switch (typeof v) {
      case "undefined": return this.u8(Tag.Undefined);
      case "boolean": return this.u8(v ? Tag.True : Tag.False);
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
      case "string": return this.string(v);
      case "bigint":
        // Hex, not decimal: linear both ways (decimal conversion of a large BigInt takes seconds).
        this.u8(Tag.BigIntHex);
        return this.string(v < 0n ? `-${(-v).toString(16)}` : v.toString(16));
      case "symbol": throw unserializable("a symbol cannot be copied into the sandbox", path);
      case "function": throw unserializable(`a function cannot be copied into the sandbox (use defineFunction to expose it)`, path);
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
    if (v instanceof GuestOpaque) throw unserializable(`${v.toString()} came from the sandbox as a description and cannot go back`, path);
    if (v instanceof Promise) throw unserializable("a Promise cannot be copied; await it first", path);
    if (v instanceof WeakMap || v instanceof WeakSet || v instanceof WeakRef) throw unserializable("a weak collection cannot be copied", path);
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
      if (typeof v.stack === "string") this.string(v.stack);
      else this.u8(Tag.Undefined);
      return;
    }
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
    const isDataView = v instanceof DataView;
    const isFloat16 = float16Ctor !== undefined && v instanceof float16Ctor;
    const kind = isDataView ? DATAVIEW_KIND : isFloat16 ? FLOAT16_KIND : TYPED_CTORS.findIndex((c) => v instanceof c);
    if (kind < 0) throw unserializable("this kind of view cannot be copied", path);
    if (!(v.buffer instanceof ArrayBuffer)) throw unserializable("a view on a SharedArrayBuffer cannot be copied", path);
    const length = isDataView ? v.byteLength : (v as TypedArray).length;
    this.u8(Tag.TypedArray);
    this.u8(kind);
    const shared = this.ids!.get(v.buffer);
    if (shared !== undefined) {
      this.u8(Tag.BackRef);
      this.u32(shared);
      this.u32(v.byteOffset);
      return this.u32(length);
    }
    this.nextId++;
    this.u8(Tag.ArrayBuffer);
    this.u32(v.byteLength);
    this.ensure(v.byteLength);
    this.buf.set(new Uint8Array(v.buffer, v.byteOffset, v.byteLength), this.pos);
    this.pos += v.byteLength;
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
    const indices: Iterable<number> = v.length <= 1 << 20 ? v.keys() : Object.keys(v).map(Number).filter(Number.isInteger);
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
export function encodeValue(value: unknown, limits: CopyLimits = DEFAULT_LIMITS): Buffer {
  const w = new Writer(limits);
  w.value(value, 0, "");
  return w.buf.subarray(0, w.pos);
}

/**
 * Encodes into `target` when the value fits (returns the byte count), else into a new buffer.
 * Host calls use this with a buffer shared with the addon, so small values cost no allocation.
 */
export function encodeValueInto(value: unknown, target: Buffer, limits: CopyLimits = DEFAULT_LIMITS): number | Buffer {
  const w = new Writer(limits, target);
  w.value(value, 0, "");
  return w.buf === target ? w.pos : w.buf.subarray(0, w.pos);
}

/**
 * Work of a decode, in units of roughly equal host time (0.2 to 0.8 µs here): one per value, one
 * per this many bytes of text or binary data copied, and more for what costs V8 more to make: an
 * object property (the key is interned, a hash table grows), a Date, RegExp, BigInt, ArrayBuffer
 * or view, and most of all an Error (V8 captures a host stack trace for each).
 */
const BYTES_PER_WORK_UNIT = 128;
const PROPERTY_WORK = 2;
const HOST_OBJECT_WORK = 3;
const ERROR_WORK = 120;
/** A longer string or ArrayBuffer is copied this many bytes at a time, so it can span slices. */
const CHUNK_BYTES = 256 * 1024;

/**
 * Objects with this many keys or more are hash tables in V8, and listing their keys (for-in,
 * `Object.keys`) walks all of them, even to show the first few: the decoder keeps their keys.
 */
const MANY_KEYS = 1024;
const keysOfLargeObjects = new WeakMap<object, KeysAtDecode>();

/** What the decoder recorded of an object with many keys. */
export interface KeysAtDecode {
  /** Its own keys, in order: all of them, or the first ones of a copy made for display. */
  readonly keys: readonly string[];
  /** How many keys the guest's object had. */
  readonly count: number;
}

/**
 * The keys of an object with many keys as the decoder made it (undefined for any other object):
 * for a renderer that shows the first few without listing every key again.
 */
export function keysAtDecode(object: object): KeysAtDecode | undefined {
  return keysOfLargeObjects.get(object);
}

/**
 * Keys a copy made for display keeps per object with many keys: `renderValue(value, maxChars)`
 * charges at least 4 characters per key shown (its `: ` and the smallest value), so it never shows
 * more, and the one after them makes it print `... N more keys`.
 */
export function keysShownWithin(maxChars: number): number {
  return Math.floor(Math.max(0, maxChars) / 4) + 2;
}

function malformed(what = "value"): SandboxError {
  return new SandboxError("UNSERIALIZABLE", `malformed ${what} data from the sandbox`);
}

// A host constructor refused what the guest built (a view, a BigInt, a string over V8's limit).
function decodeFailure(err: unknown): SandboxError {
  if (err instanceof SandboxError) return err;
  const reason = err instanceof Error ? err.message.split("\n", 1)[0] : "unknown reason";
  return new SandboxError("UNSERIALIZABLE", `the value cannot be re-created outside the sandbox: ${reason}`);
}

const enum Open {
  Array,
  Object,
  Map,
  Set,
  View,
  Parts,
  Text,
  Bytes,
}

/** Values made from strings (and an error's stack value) read first. */
type PartsTag = Tag.BigIntHex | Tag.RegExp | Tag.Error | Tag.Opaque;

/** A value being decoded, on the decoder's stack: a container being filled, or a value waiting for its parts. */
type OpenValue =
  | { kind: Open.Array; array: unknown[]; length: number; left: number; index: number }
  | { kind: Open.Object; object: Record<string, unknown>; left: number; count: number; key: string | undefined; keys: string[] | undefined }
  | { kind: Open.Map; map: Map<unknown, unknown>; left: number; key: unknown; haveKey: boolean }
  | { kind: Open.Set; set: Set<unknown>; left: number }
  | { kind: Open.View; viewKind: number; slot: number }
  | { kind: Open.Parts; tag: PartsTag; parts: unknown[]; count: number; slot: number; opaqueKind: GuestOpaqueKind }
  | { kind: Open.Text; latin1: boolean; left: number; text: string }
  | { kind: Open.Bytes; bytes: Uint8Array; copied: number };

/** A decode that can stop after a budget of work and go on later (see {@link ValueDecoder}). */
export interface ResumableDecode<T> {
  /** Work done so far, in the units of {@link ValueDecoder.work}. */
  readonly work: number;
  /** Decodes until done (true) or until about `budget` more units of work are spent (false). Throws `SandboxError`. */
  advance(budget: number): boolean;
  /** The result, once {@link ResumableDecode.advance} returned true. */
  readonly value: T;
}

/**
 * Decodes one value the sandbox sent, resumably: {@link ValueDecoder.advance} works through a
 * budget and can be called again later, so a large value never holds the thread in one go.
 * Unfinished values wait on an explicit stack: nesting costs no host stack. The value is the same
 * whatever the budgets: shared references and cycles kept, own `__proto__` keys kept as data.
 *
 * With `displayChars`, the copy is for `renderValue(value, displayChars)` only: an object with
 * many keys keeps just the first {@link keysShownWithin} of them (the rest are read, counted and
 * dropped), so a result of 300,000 keys never becomes a host object of that size, one V8 grows
 * by copying its whole table at once. It renders to the same text as the exact copy.
 */
export class ValueDecoder implements ResumableDecode<unknown> {
  private buf: Buffer;
  private pos = 0;
  private readonly objects: unknown[] = []; // by the number the encoder gave them (back references)
  private readonly open: OpenValue[] = [];
  private readonly keysKept: number; // per object with many keys
  private done = false;
  private result: unknown;
  /** Work done so far (see {@link BYTES_PER_WORK_UNIT} for the units). */
  work = 0;

  constructor(bytes: Buffer, displayChars?: number) {
    this.buf = bytes;
    this.keysKept = displayChars === undefined ? Infinity : keysShownWithin(displayChars);
  }

  get value(): unknown {
    return this.result;
  }

  /** Goes on with a private copy of the bytes: for a caller that reuses its buffer (the exchange buffer). */
  detach(): void {
    this.buf = Buffer.from(this.buf);
  }

  advance(budget: number): boolean {
    const until = this.work + budget;
    try {
      while (!this.done) {
        if (this.work >= until) return false;
        this.step();
      }
    } catch (err) {
      throw decodeFailure(err);
    }
    return true;
  }

  private need(n: number): void {
    if (this.pos + n > this.buf.length) throw malformed();
  }
  private u8(): number {
    this.need(1);
    return this.buf[this.pos++]!;
  }
  private u32(): number {
    this.need(4);
    const v = this.buf.readUInt32LE(this.pos);
    this.pos += 4;
    return v;
  }
  private f64(): number {
    this.need(8);
    const v = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    return v;
  }
  // The innermost unfinished value. (Reading past the end of an array is slow in V8.)
  private top(): OpenValue | undefined {
    const n = this.open.length;
    return n === 0 ? undefined : this.open[n - 1];
  }
  private text(latin1: boolean, bytes: number): string {
    const s = this.buf.toString(latin1 ? "latin1" : "utf16le", this.pos, this.pos + bytes);
    this.pos += bytes;
    this.work += (bytes / BYTES_PER_WORK_UNIT) | 0;
    return s;
  }

  // The next piece of work: the next part of the innermost unfinished value, or its end.
  private step(): void {
    const top = this.top();
    switch (top?.kind) {
      case Open.Array:
        if (top.left === 0) {
          this.open.pop();
          top.array.length = top.length; // trailing holes
          return this.produce(top.array);
        }
        top.index = this.u32();
        return this.begin(false);
      case Open.Object:
        if (top.left === 0) {
          this.open.pop();
          if (top.keys) keysOfLargeObjects.set(top.object, { keys: top.keys, count: top.count });
          return this.produce(top.object);
        }
        // A key, then its value; a key a copy for display drops is skipped, never made a string.
        if (top.key === undefined && top.keys !== undefined && top.keys.length >= this.keysKept) return this.skipKey(top);
        return this.begin(top.key === undefined);
      case Open.Map:
      case Open.Set:
        if (top.left === 0) {
          this.open.pop();
          return this.produce(top.kind === Open.Map ? top.map : top.set);
        }
        return this.begin(false);
      case Open.Parts:
        return this.begin(!(top.tag === Tag.Error && top.parts.length === 2)); // strings, but an error's stack can be anything
      case Open.Text: {
        const n = Math.min(top.left, CHUNK_BYTES);
        top.text += this.text(top.latin1, n);
        top.left -= n;
        if (top.left > 0) return;
        this.open.pop();
        return this.produce(top.text);
      }
      case Open.Bytes: {
        const n = Math.min(top.bytes.length - top.copied, CHUNK_BYTES);
        top.bytes.set(this.buf.subarray(this.pos, this.pos + n), top.copied);
        this.pos += n;
        this.work += (n / BYTES_PER_WORK_UNIT) | 0;
        top.copied += n;
        if (top.copied < top.bytes.length) return;
        this.open.pop();
        return this.produce(top.bytes.buffer);
      }
      default:
        return this.begin(false); // the root, or a view's buffer
    }
  }

  // Steps over the next key of `object` (its value is still decoded: later references may need it).
  private skipKey(object: { key: string | undefined }): void {
    this.work++;
    const tag = this.u8();
    const n = this.u32();
    if (tag !== Tag.Latin1 && tag !== Tag.String) throw malformed("string");
    const bytes = tag === Tag.Latin1 ? n : n * 2;
    this.need(bytes);
    this.pos += bytes;
    object.key = ""; // dropped by produce, which attaches no more keys to this object
  }

  // Reads one value (a string when `string`): a scalar is produced at once, anything else opened.
  private begin(string: boolean): void {
    this.work++;
    const tag = this.u8();
    if (string && tag !== Tag.Latin1 && tag !== Tag.String) {
      this.u32();
      throw malformed("string");
    }
    switch (tag) {
      case Tag.Undefined: return this.produce(undefined);
      case Tag.Null: return this.produce(null);
      case Tag.False: return this.produce(false);
      case Tag.True: return this.produce(true);
      case Tag.Int32: {
        this.need(4);
        const v = this.buf.readInt32LE(this.pos);
        this.pos += 4;
        return this.produce(v);
      }
      case Tag.Float64: return this.produce(this.f64());
      case Tag.String:
      case Tag.Latin1: {
        const latin1 = tag === Tag.Latin1;
        const n = this.u32();
        const bytes = latin1 ? n : n * 2;
        this.need(bytes);
        if (bytes <= CHUNK_BYTES) return this.produce(this.text(latin1, bytes));
        this.open.push({ kind: Open.Text, latin1, left: bytes, text: "" });
        return;
      }
      case Tag.Array: {
        const length = this.u32();
        const left = this.u32();
        const array: unknown[] = [];
        this.objects.push(array);
        this.open.push({ kind: Open.Array, array, length, left, index: 0 });
        return;
      }
      case Tag.Object: {
        const nullProto = this.u8() === 1;
        const left = this.u32();
        const object: Record<string, unknown> = nullProto ? Object.create(null) : {};
        this.objects.push(object);
        this.open.push({ kind: Open.Object, object, left, count: left, key: undefined, keys: left >= MANY_KEYS ? [] : undefined });
        return;
      }
      case Tag.Date: {
        this.work += HOST_OBJECT_WORK;
        const d = new Date(this.f64());
        this.objects.push(d);
        return this.produce(d);
      }
      case Tag.Map: {
        const map = new Map<unknown, unknown>();
        this.objects.push(map);
        this.open.push({ kind: Open.Map, map, left: this.u32(), key: undefined, haveKey: false });
        return;
      }
      case Tag.Set: {
        const set = new Set<unknown>();
        this.objects.push(set);
        this.open.push({ kind: Open.Set, set, left: this.u32() });
        return;
      }
      case Tag.ArrayBuffer: {
        const n = this.u32();
        this.need(n);
        this.work += HOST_OBJECT_WORK;
        const bytes = new Uint8Array(new ArrayBuffer(n));
        this.objects.push(bytes.buffer);
        this.open.push({ kind: Open.Bytes, bytes, copied: 0 });
        return this.step();
      }
      case Tag.TypedArray: {
        const viewKind = this.u8();
        this.open.push({ kind: Open.View, viewKind, slot: this.objects.push(undefined) - 1 });
        return; // its buffer comes next
      }
      case Tag.BigIntHex: return this.openParts(tag, 1, -1, "object");
      case Tag.RegExp: return this.openParts(tag, 2, this.objects.push(undefined) - 1, "object");
      case Tag.Error: return this.openParts(tag, 3, this.objects.push(undefined) - 1, "object");
      case Tag.Opaque: return this.openParts(tag, 1, -1, OPAQUE_KINDS[this.u8()] ?? "object");
      case Tag.BackRef: {
        const id = this.u32();
        if (id >= this.objects.length || this.objects[id] === undefined) throw new SandboxError("UNSERIALIZABLE", "malformed reference in value data");
        return this.produce(this.objects[id]);
      }
      default:
        throw new SandboxError("UNSERIALIZABLE", `malformed value data from the sandbox (tag ${tag})`);
    }
  }

  private openParts(tag: PartsTag, count: number, slot: number, opaqueKind: GuestOpaqueKind): void {
    this.open.push({ kind: Open.Parts, tag, parts: [], count, slot, opaqueKind });
  }

  // Hands a finished value to the innermost unfinished one; a value that this completes is handed
  // on in turn.
  private produce(value: unknown): void {
    for (;;) {
      const top = this.top();
      switch (top?.kind) {
        case undefined:
          this.done = true;
          this.result = value;
          if (this.pos !== this.buf.length) throw new SandboxError("UNSERIALIZABLE", "malformed value data (trailing bytes)");
          return;
        case Open.Array:
          top.array[top.index] = value;
          top.left--;
          return;
        case Open.Object:
          if (top.key === undefined) {
            top.key = value as string;
            return;
          }
          if (top.keys === undefined || top.keys.length < this.keysKept) {
            top.keys?.push(top.key);
            if (top.key === "__proto__") Object.defineProperty(top.object, top.key, { value, writable: true, enumerable: true, configurable: true });
            else top.object[top.key] = value;
            this.work += PROPERTY_WORK;
          }
          top.key = undefined;
          top.left--;
          return;
        case Open.Map:
          if (top.haveKey) {
            top.map.set(top.key, value);
            top.left--;
          } else {
            top.key = value;
          }
          top.haveKey = !top.haveKey;
          return;
        case Open.Set:
          top.set.add(value);
          top.left--;
          return;
        case Open.View:
          this.open.pop();
          value = this.view(top.viewKind, top.slot, value);
          continue;
        case Open.Parts:
          top.parts.push(value);
          if (top.parts.length < top.count) return;
          this.open.pop();
          value = this.fromParts(top.tag, top.parts, top.slot, top.opaqueKind);
          continue;
        default:
          throw malformed(); // text and bytes are filled by step, never handed a value
      }
    }
  }

  private view(kind: number, slot: number, buffer: unknown): unknown {
    const offset = this.u32();
    const length = this.u32();
    if (!(buffer instanceof ArrayBuffer)) throw malformed("typed array");
    const ctor = kind === DATAVIEW_KIND ? DataView : kind === FLOAT16_KIND ? float16Ctor : TYPED_CTORS[kind];
    if (!ctor) throw new SandboxError("UNSERIALIZABLE", "a Float16Array cannot be copied into this Node.js version");
    const elementSize = (ctor as { BYTES_PER_ELEMENT?: number }).BYTES_PER_ELEMENT ?? 1;
    if (offset % elementSize !== 0 || offset + length * elementSize > buffer.byteLength) throw new SandboxError("UNSERIALIZABLE", "malformed typed array data from the sandbox (view outside its buffer)");
    this.work += HOST_OBJECT_WORK;
    const view = new ctor(buffer, offset, length);
    this.objects[slot] = view;
    return view;
  }

  private fromParts(tag: PartsTag, parts: unknown[], slot: number, opaqueKind: GuestOpaqueKind): unknown {
    this.work += tag === Tag.Error ? ERROR_WORK : HOST_OBJECT_WORK;
    switch (tag) {
      case Tag.BigIntHex: {
        const text = parts[0] as string;
        if (!/^-?[0-9a-f]+$/.test(text)) throw malformed("BigInt");
        return text.startsWith("-") ? -BigInt(`0x${text.slice(1)}`) : BigInt(`0x${text}`);
      }
      case Tag.RegExp: {
        const [source, flags] = parts as [string, string];
        let re: RegExp;
        try {
          re = new RegExp(source, flags);
        } catch {
          // QuickJS accepts some syntax this Node.js version does not (modifiers such as `(?i:a)`).
          const shown = source.length > 100 ? `${source.slice(0, 100)}...` : source;
          throw new SandboxError("UNSERIALIZABLE", `the regular expression /${shown}/${flags} is valid in the sandbox but not in this Node.js version`);
        }
        this.objects[slot] = re;
        return re;
      }
      case Tag.Error: {
        const [name, message, stack] = parts as [string, string, unknown];
        const Ctor = ERROR_CTORS[name] ?? Error;
        const err = new Ctor(message);
        if (err.name !== name) Object.defineProperty(err, "name", { value: name, writable: true, configurable: true });
        Object.defineProperty(err, "stack", { value: typeof stack === "string" ? stack : `${name}: ${message}`, writable: true, configurable: true });
        this.objects[slot] = err;
        return err;
      }
      default: {
        const name = parts[0] as string;
        return new GuestOpaque(opaqueKind, name || undefined);
      }
    }
  }
}

/**
 * Decodes a value the sandbox sent, in one go (for display only with `displayChars`: see
 * {@link ValueDecoder}). Every failure is a `SandboxError` with a one-line reason.
 */
export function decodeValue(bytes: Buffer, displayChars?: number): unknown {
  const decoder = new ValueDecoder(bytes, displayChars);
  decoder.advance(Infinity);
  return decoder.value;
}

/** One console call of an eval: its level (an index into the console levels) and its arguments. */
export interface ConsoleRecord {
  level: number;
  args: unknown[];
}

/** Decodes the console record of one eval, resumably: repeated (u8 level, u32 size, encoded argument array). */
export class ConsoleDecoder implements ResumableDecode<ConsoleRecord[]> {
  readonly #bytes: Buffer;
  #pos = 0;
  #current: { level: number; args: ValueDecoder } | undefined;
  readonly #records: ConsoleRecord[] = [];
  work = 0;

  constructor(bytes: Buffer) {
    this.#bytes = bytes;
  }

  get value(): ConsoleRecord[] {
    return this.#records;
  }

  advance(budget: number): boolean {
    const until = this.work + budget;
    for (;;) {
      if (this.#current === undefined) {
        if (this.#pos + 5 > this.#bytes.length) return true;
        if (this.work >= until) return false;
        const level = this.#bytes[this.#pos]!;
        const size = this.#bytes.readUInt32LE(this.#pos + 1);
        this.#pos += 5;
        this.#current = { level, args: new ValueDecoder(this.#bytes.subarray(this.#pos, this.#pos + size)) };
        this.#pos += size;
      }
      const { level, args } = this.#current;
      const before = args.work;
      const done = args.advance(until - this.work);
      this.work += args.work - before;
      if (!done) return false;
      this.#current = undefined;
      this.#records.push({ level, args: Array.isArray(args.value) ? args.value : [args.value] });
    }
  }
}

/** Decodes the console record of one eval in one go. */
export function decodeConsole(bytes: Buffer): ConsoleRecord[] {
  const decoder = new ConsoleDecoder(bytes);
  decoder.advance(Infinity);
  return decoder.value;
}
