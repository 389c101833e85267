/**
 * The host's decoder: the wire format (native/wire.h) -> fresh Node values, resumably. Keys are
 * defined as own data properties, so a guest-supplied `__proto__` or `constructor` key cannot
 * pollute anything.
 */
import { guestErrorStack, recordClassNameAtDecode, recordKeysAtDecode, recordSizeAtDecode } from "./decoded-facts.js";
import { SandboxError } from "./errors.js";
import { OPAQUE_KINDS, TypedKind } from "./native.js";
import type { GuestOpaqueKind } from "./types.js";
import { NOT_SCALAR, smallValueOf } from "./scalar-arguments.js";
import { GuestOpaque, Tag, VIEW_CTORS } from "./wire.js";

const ERROR_CTORS: Record<string, ErrorConstructor> = {
  Error,
  TypeError,
  RangeError,
  SyntaxError,
  ReferenceError,
  EvalError,
  URIError,
};

/**
 * Work of a decode, in units of roughly equal host time (0.2 to 0.8 µs here): one per value, one
 * per this many bytes of text or binary data copied, and more for what costs V8 more to make: an
 * object property (the key is interned, a hash table grows), a Map or Set entry (hashed into a
 * table that grows), a Date, RegExp, BigInt, ArrayBuffer or view, and most of all an Error (V8
 * captures a host stack trace for each).
 */
const BYTES_PER_WORK_UNIT = 128;
const PROPERTY_WORK = 2;
const ENTRY_WORK = 3;
const HOST_OBJECT_WORK = 3;
const ERROR_WORK = 120;
/** A longer string or ArrayBuffer is copied this many bytes at a time, so it can span slices. */
const CHUNK_BYTES = 256 * 1024;

/**
 * Objects with this many keys or more are hash tables in V8, and listing their keys (for-in,
 * `Object.keys`) walks all of them, even to show the first few: the decoder keeps their keys.
 */
const MANY_KEYS = 1024;

/** Object flag bits (native/boundary.h): a null prototype, a class name string before the count. */
const NULL_PROTOTYPE = 1;
const CLASS_NAME = 2;
/** Longest class name the engine writes (native/guest_codec.cc), in UTF-16 units. */
const MAX_CLASS_NAME_UNITS = 256;

function malformed(what = "value"): SandboxError {
  return new SandboxError("UNSERIALIZABLE", `malformed ${what} data from the sandbox`);
}

// A host constructor refused what the guest built (a view, a BigInt, a string over V8's limit).
function decodeFailure(err: unknown): SandboxError {
  if (err instanceof SandboxError) return err;
  const reason = err instanceof Error ? err.message.split("\n", 1)[0] : "unknown reason";
  return new SandboxError("UNSERIALIZABLE", `the value cannot be re-created outside the sandbox: ${reason}`);
}

/**
 * What {@link ValueDecoder} does with each tag, numbered densely here so that its switch has
 * literal cases (a jump table); {@link CASE_OF_TAG} maps the boundary table's tag bytes to them.
 */
const enum Case {
  Malformed,
  Undefined,
  Null,
  False,
  True,
  Int32,
  Float64,
  String,
  Latin1,
  Array,
  Object,
  Date,
  Map,
  Set,
  ArrayBuffer,
  TypedArray,
  BigIntHex,
  RegExp,
  Error,
  Opaque,
  BackRef,
}

/** The {@link Case} of each tag byte (Malformed for a byte the table does not name). */
const CASE_OF_TAG = new Uint8Array(256);
for (const [tag, c] of [
  [Tag.Undefined, Case.Undefined],
  [Tag.Null, Case.Null],
  [Tag.False, Case.False],
  [Tag.True, Case.True],
  [Tag.Int32, Case.Int32],
  [Tag.Float64, Case.Float64],
  [Tag.String, Case.String],
  [Tag.Latin1, Case.Latin1],
  [Tag.Array, Case.Array],
  [Tag.Object, Case.Object],
  [Tag.Date, Case.Date],
  [Tag.Map, Case.Map],
  [Tag.Set, Case.Set],
  [Tag.ArrayBuffer, Case.ArrayBuffer],
  [Tag.TypedArray, Case.TypedArray],
  [Tag.BigIntHex, Case.BigIntHex],
  [Tag.RegExp, Case.RegExp],
  [Tag.Error, Case.Error],
  [Tag.Opaque, Case.Opaque],
  [Tag.BackRef, Case.BackRef],
] as const) {
  CASE_OF_TAG[tag] = c;
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

/** Tags of values made from strings (and an error's stack value) read first: BigIntHex, RegExp, Error, Opaque. */
type PartsTag = number;

/** A value being decoded, on the decoder's stack: a container being filled, or a value waiting for its parts. */
type OpenValue =
  | { kind: Open.Array; array: unknown[]; length: number; left: number; index: number }
  | {
      kind: Open.Object;
      object: Record<string, unknown>;
      left: number;
      count: number;
      cut: boolean;
      key: string | undefined;
      keys: string[] | undefined;
    }
  | { kind: Open.Map; map: Map<unknown, unknown>; left: number; key: unknown; haveKey: boolean }
  | { kind: Open.Set; set: Set<unknown>; left: number }
  | { kind: Open.View; viewKind: number; slot: number }
  | { kind: Open.Parts; tag: PartsTag; parts: unknown[]; count: number; slot: number; opaqueKind: GuestOpaqueKind }
  | { kind: Open.Text; latin1: boolean; left: number; text: string; pieces: string[] }
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
 * A copy for display (an eval run with `displayChars`) holds only the head of a large value: the
 * engine cut its containers short, each ending in a `More` count, recorded for the renderer in
 * src/decoded-facts.ts (`keysAtDecode`, `sizeAtDecode`).
 */
export class ValueDecoder implements ResumableDecode<unknown> {
  private buf: Buffer;
  private pos = 0;
  private readonly objects: unknown[] = []; // by the number the encoder gave them (back references)
  private readonly open: OpenValue[] = [];
  private done = false;
  private result: unknown;
  private resultPieces: readonly string[] | undefined;
  /** Work done so far (see {@link BYTES_PER_WORK_UNIT} for the units). */
  work = 0;

  constructor(bytes: Buffer) {
    this.buf = bytes;
  }

  get value(): unknown {
    return this.result;
  }

  /**
   * The flat strings that, joined, are {@link value} when it is a string decoded in several
   * chunks. The value itself is their concatenation as V8 builds it (a rope): reading any part of
   * it (a `slice`, a regexp) first copies all of it into one flat string, in one go on the calling
   * thread. A caller that needs only some of it (a head, a tail) takes it from the pieces.
   */
  get pieces(): readonly string[] | undefined {
    return this.resultPieces;
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
          if (top.keys !== undefined || top.cut) recordKeysAtDecode(top.object, { keys: top.keys, count: top.count });
          return this.produce(top.object);
        }
        // A key, then its value; or the count that ends an object a copy for display cut short.
        if (top.key === undefined && this.buf[this.pos] === Tag.More) {
          top.count = this.more(top, top.count - 1);
          top.cut = true;
          return;
        }
        return this.begin(top.key === undefined);
      case Open.Map:
      case Open.Set:
        if (top.left === 0) {
          this.open.pop();
          return this.produce(top.kind === Open.Map ? top.map : top.set);
        }
        if ((top.kind === Open.Set || !top.haveKey) && this.buf[this.pos] === Tag.More) {
          const collection = top.kind === Open.Map ? top.map : top.set;
          recordSizeAtDecode(collection, this.more(top, collection.size));
          return;
        }
        return this.begin(false);
      case Open.Parts:
        return this.begin(!(top.tag === Tag.Error && top.parts.length === 2)); // strings, but an error's stack can be anything
      case Open.Text: {
        const n = Math.min(top.left, CHUNK_BYTES);
        const piece = this.text(top.latin1, n);
        top.text += piece;
        top.pieces.push(piece);
        top.left -= n;
        if (top.left > 0) return;
        this.open.pop();
        if (this.open.length === 0) this.resultPieces = top.pieces;
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

  // Reads the `More` count that ends a container cut short (its last entry), holding `held` entries.
  private more(container: { left: number }, held: number): number {
    this.work++;
    this.pos++;
    const count = this.u32();
    if (container.left !== 1 || count < held) throw malformed();
    container.left = 0;
    return count;
  }

  // Reads one value (a string when `string`): a scalar is produced at once, anything else opened.
  private begin(string: boolean): void {
    this.work++;
    const tag = this.u8();
    if (string && tag !== Tag.Latin1 && tag !== Tag.String) {
      this.u32();
      throw malformed("string");
    }
    switch (CASE_OF_TAG[tag]) {
      case Case.Undefined:
        return this.produce(undefined);
      case Case.Null:
        return this.produce(null);
      case Case.False:
        return this.produce(false);
      case Case.True:
        return this.produce(true);
      case Case.Int32: {
        this.need(4);
        const v = this.buf.readInt32LE(this.pos);
        this.pos += 4;
        return this.produce(v);
      }
      case Case.Float64:
        return this.produce(this.f64());
      case Case.String:
      case Case.Latin1: {
        const latin1 = tag === Tag.Latin1;
        const n = this.u32();
        const bytes = latin1 ? n : n * 2;
        this.need(bytes);
        if (bytes <= CHUNK_BYTES) return this.produce(this.text(latin1, bytes));
        this.open.push({ kind: Open.Text, latin1, left: bytes, text: "", pieces: [] });
        return;
      }
      case Case.Array: {
        const length = this.u32();
        const left = this.u32();
        const array: unknown[] = [];
        this.objects.push(array);
        this.open.push({ kind: Open.Array, array, length, left, index: 0 });
        return;
      }
      case Case.Object: {
        const flags = this.u8();
        const name = flags & CLASS_NAME ? this.shortString() : undefined;
        const left = this.u32();
        const object: Record<string, unknown> = flags & NULL_PROTOTYPE ? Object.create(null) : {};
        if (name !== undefined) recordClassNameAtDecode(object, name);
        this.objects.push(object);
        this.open.push({
          kind: Open.Object,
          object,
          left,
          count: left,
          cut: false,
          key: undefined,
          keys: left >= MANY_KEYS ? [] : undefined,
        });
        return;
      }
      case Case.Date: {
        this.work += HOST_OBJECT_WORK;
        const d = new Date(this.f64());
        this.objects.push(d);
        return this.produce(d);
      }
      case Case.Map: {
        const map = new Map<unknown, unknown>();
        this.objects.push(map);
        this.open.push({ kind: Open.Map, map, left: this.u32(), key: undefined, haveKey: false });
        return;
      }
      case Case.Set: {
        const set = new Set<unknown>();
        this.objects.push(set);
        this.open.push({ kind: Open.Set, set, left: this.u32() });
        return;
      }
      case Case.ArrayBuffer: {
        const n = this.u32();
        this.need(n);
        this.work += HOST_OBJECT_WORK;
        const bytes = new Uint8Array(new ArrayBuffer(n));
        this.objects.push(bytes.buffer);
        this.open.push({ kind: Open.Bytes, bytes, copied: 0 });
        return this.step();
      }
      case Case.TypedArray: {
        const viewKind = this.u8();
        this.open.push({ kind: Open.View, viewKind, slot: this.objects.push(undefined) - 1 });
        return; // its buffer comes next
      }
      case Case.BigIntHex:
        return this.openParts(tag, 1, -1, "object");
      case Case.RegExp:
        return this.openParts(tag, 2, this.objects.push(undefined) - 1, "object");
      case Case.Error:
        return this.openParts(tag, 3, this.objects.push(undefined) - 1, "object");
      case Case.Opaque:
        return this.openParts(tag, 1, -1, OPAQUE_KINDS[this.u8()] ?? "object");
      case Case.BackRef: {
        const id = this.u32();
        if (id >= this.objects.length || this.objects[id] === undefined)
          throw new SandboxError("UNSERIALIZABLE", "malformed reference in value data");
        return this.produce(this.objects[id]);
      }
      default:
        throw new SandboxError("UNSERIALIZABLE", `malformed value data from the sandbox (tag ${tag})`);
    }
  }

  // A string of at most MAX_CLASS_NAME_UNITS, read at once (a class name).
  private shortString(): string {
    const tag = this.u8();
    const n = this.u32();
    if ((tag !== Tag.Latin1 && tag !== Tag.String) || n > MAX_CLASS_NAME_UNITS) throw malformed("class name");
    const bytes = tag === Tag.Latin1 ? n : 2 * n;
    this.need(bytes);
    return this.text(tag === Tag.Latin1, bytes);
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
          if (this.pos !== this.buf.length)
            throw new SandboxError("UNSERIALIZABLE", "malformed value data (trailing bytes)");
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
          top.keys?.push(top.key);
          if (top.key === "__proto__")
            Object.defineProperty(top.object, top.key, { value, writable: true, enumerable: true, configurable: true });
          else top.object[top.key] = value;
          this.work += PROPERTY_WORK;
          top.key = undefined;
          top.left--;
          return;
        case Open.Map:
          if (top.haveKey) {
            top.map.set(top.key, value);
            top.left--;
            this.work += ENTRY_WORK;
          } else {
            top.key = value;
          }
          top.haveKey = !top.haveKey;
          return;
        case Open.Set:
          top.set.add(value);
          top.left--;
          this.work += ENTRY_WORK;
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
    const ctor = VIEW_CTORS[kind];
    if (!ctor)
      throw new SandboxError(
        "UNSERIALIZABLE",
        kind === TypedKind.Float16
          ? "a Float16Array cannot be copied into this Node.js version"
          : "malformed typed array kind from the sandbox",
      );
    const elementSize = (ctor as { BYTES_PER_ELEMENT?: number }).BYTES_PER_ELEMENT ?? 1;
    if (offset % elementSize !== 0 || offset + length * elementSize > buffer.byteLength)
      throw new SandboxError("UNSERIALIZABLE", "malformed typed array data from the sandbox (view outside its buffer)");
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
          throw new SandboxError(
            "UNSERIALIZABLE",
            `the regular expression /${shown}/${flags} is valid in the sandbox but not in this Node.js version`,
          );
        }
        this.objects[slot] = re;
        return re;
      }
      case Tag.Error: {
        const [name, message, stack] = parts as [string, string, unknown];
        const Ctor = ERROR_CTORS[name] ?? Error;
        const err = new Ctor(message);
        if (err.name !== name) Object.defineProperty(err, "name", { value: name, writable: true, configurable: true });
        Object.defineProperty(err, "stack", {
          value: guestErrorStack(name, message, stack),
          writable: true,
          configurable: true,
        });
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
 * Decodes a value the sandbox sent, in one go. Every failure is a `SandboxError` with a one-line
 * reason.
 */
export function decodeValue(bytes: Buffer): unknown {
  const small = smallValueOf(bytes);
  if (small !== NOT_SCALAR) return small;
  const decoder = new ValueDecoder(bytes);
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
