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

class Reader {
  pos = 0;
  private objects: unknown[] = [];

  constructor(private readonly buf: Buffer) {}

  private need(n: number): void {
    if (this.pos + n > this.buf.length) throw new SandboxError("UNSERIALIZABLE", "malformed value data from the sandbox");
  }
  u8(): number {
    this.need(1);
    return this.buf[this.pos++]!;
  }
  u32(): number {
    this.need(4);
    const v = this.buf.readUInt32LE(this.pos);
    this.pos += 4;
    return v;
  }
  f64(): number {
    this.need(8);
    const v = this.buf.readDoubleLE(this.pos);
    this.pos += 8;
    return v;
  }
  string(): string {
    return this.stringBody(this.u8());
  }
  stringBody(tag: number): string {
    const n = this.u32();
    if (tag === Tag.Latin1) {
      this.need(n);
      const s = this.buf.toString("latin1", this.pos, this.pos + n);
      this.pos += n;
      return s;
    }
    if (tag !== Tag.String) throw new SandboxError("UNSERIALIZABLE", "malformed string data from the sandbox");
    this.need(n * 2);
    const s = this.buf.toString("utf16le", this.pos, this.pos + n * 2);
    this.pos += n * 2;
    return s;
  }

  value(): unknown {
    const tag = this.u8();
    switch (tag) {
      case Tag.Undefined: return undefined;
      case Tag.Null: return null;
      case Tag.False: return false;
      case Tag.True: return true;
      case Tag.Int32: {
        this.need(4);
        const v = this.buf.readInt32LE(this.pos);
        this.pos += 4;
        return v;
      }
      case Tag.Float64: return this.f64();
      case Tag.String:
      case Tag.Latin1: return this.stringBody(tag);
      case Tag.BigIntHex: {
        const text = this.string();
        if (!/^-?[0-9a-f]+$/.test(text)) throw new SandboxError("UNSERIALIZABLE", "malformed BigInt data from the sandbox");
        return text.startsWith("-") ? -BigInt(`0x${text.slice(1)}`) : BigInt(`0x${text}`);
      }
      case Tag.Array: {
        const length = this.u32();
        const count = this.u32();
        const arr: unknown[] = [];
        this.objects.push(arr);
        for (let i = 0; i < count; i++) {
          const index = this.u32();
          arr[index] = this.value();
        }
        arr.length = length; // trailing holes
        return arr;
      }
      case Tag.Object: {
        const nullProto = this.u8() === 1;
        const count = this.u32();
        const obj: Record<string, unknown> = nullProto ? Object.create(null) : {};
        this.objects.push(obj);
        for (let i = 0; i < count; i++) {
          const key = this.string();
          const item = this.value();
          if (key === "__proto__") Object.defineProperty(obj, key, { value: item, writable: true, enumerable: true, configurable: true });
          else obj[key] = item;
        }
        return obj;
      }
      case Tag.Date: {
        const d = new Date(this.f64());
        this.objects.push(d);
        return d;
      }
      case Tag.RegExp: {
        const slot = this.objects.push(undefined) - 1;
        const source = this.string();
        const flags = this.string();
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
      case Tag.Map: {
        const m = new Map<unknown, unknown>();
        this.objects.push(m);
        const count = this.u32();
        for (let i = 0; i < count; i++) {
          const k = this.value();
          m.set(k, this.value());
        }
        return m;
      }
      case Tag.Set: {
        const s = new Set<unknown>();
        this.objects.push(s);
        const count = this.u32();
        for (let i = 0; i < count; i++) s.add(this.value());
        return s;
      }
      case Tag.ArrayBuffer: {
        const n = this.u32();
        this.need(n);
        const ab = new ArrayBuffer(n);
        new Uint8Array(ab).set(this.buf.subarray(this.pos, this.pos + n));
        this.pos += n;
        this.objects.push(ab);
        return ab;
      }
      case Tag.TypedArray: {
        const kind = this.u8();
        const slot = this.objects.push(undefined) - 1;
        const buffer = this.value();
        const offset = this.u32();
        const length = this.u32();
        if (!(buffer instanceof ArrayBuffer)) throw new SandboxError("UNSERIALIZABLE", "malformed typed array data from the sandbox");
        const ctor = kind === DATAVIEW_KIND ? DataView : kind === FLOAT16_KIND ? float16Ctor : TYPED_CTORS[kind];
        if (!ctor) throw new SandboxError("UNSERIALIZABLE", "a Float16Array cannot be copied into this Node.js version");
        const elementSize = (ctor as { BYTES_PER_ELEMENT?: number }).BYTES_PER_ELEMENT ?? 1;
        if (offset % elementSize !== 0 || offset + length * elementSize > buffer.byteLength) throw new SandboxError("UNSERIALIZABLE", "malformed typed array data from the sandbox (view outside its buffer)");
        const view = new ctor(buffer, offset, length);
        this.objects[slot] = view;
        return view;
      }
      case Tag.Error: {
        const slot = this.objects.push(undefined) - 1;
        const name = this.string();
        const message = this.string();
        const stack = this.value();
        const Ctor = ERROR_CTORS[name] ?? Error;
        const err = new Ctor(message);
        if (err.name !== name) Object.defineProperty(err, "name", { value: name, writable: true, configurable: true });
        Object.defineProperty(err, "stack", { value: typeof stack === "string" ? stack : `${name}: ${message}`, writable: true, configurable: true });
        this.objects[slot] = err;
        return err;
      }
      case Tag.BackRef: {
        const id = this.u32();
        if (id >= this.objects.length || this.objects[id] === undefined) throw new SandboxError("UNSERIALIZABLE", "malformed reference in value data");
        return this.objects[id];
      }
      case Tag.Opaque: {
        const kind = OPAQUE_KINDS[this.u8()] ?? "object";
        const name = this.string();
        return new GuestOpaque(kind, name || undefined);
      }
      default:
        throw new SandboxError("UNSERIALIZABLE", `malformed value data from the sandbox (tag ${tag})`);
    }
  }
}

/** Decodes a value the sandbox sent. Every failure is a `SandboxError` with a one-line reason. */
export function decodeValue(bytes: Buffer): unknown {
  const r = new Reader(bytes);
  let v: unknown;
  try {
    v = r.value();
  } catch (err) {
    if (err instanceof SandboxError) throw err;
    // A host constructor refused what the guest built (a view, a BigInt, a string over V8's limit).
    const reason = err instanceof Error ? err.message.split("\n", 1)[0] : "unknown reason";
    throw new SandboxError("UNSERIALIZABLE", `the value cannot be re-created outside the sandbox: ${reason}`);
  }
  if (r.pos !== bytes.length) throw new SandboxError("UNSERIALIZABLE", "malformed value data (trailing bytes)");
  return v;
}

/** Decodes the console record of one eval: repeated (u8 level, u32 size, encoded argument array). */
export function decodeConsole(bytes: Buffer): Array<{ level: number; args: unknown[] }> {
  const out: Array<{ level: number; args: unknown[] }> = [];
  let pos = 0;
  while (pos + 5 <= bytes.length) {
    const level = bytes[pos]!;
    const size = bytes.readUInt32LE(pos + 1);
    pos += 5;
    const args = decodeValue(bytes.subarray(pos, pos + size));
    pos += size;
    out.push({ level, args: Array.isArray(args) ? args : [args] });
  }
  return out;
}
