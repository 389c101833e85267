/**
 * What both directions of the host codec share: the wire tags and typed array kinds (numbered by
 * the addon's boundary table, native/boundary.h, read in src/native.ts), the view constructors by
 * kind, and {@link GuestOpaque}, the description of a guest value that cannot be copied.
 */
import { inspect } from "node:util";
import { TypedKind, WireTag } from "./native.js";
import type { GuestOpaqueKind } from "./types.js";

/** @internal Wire tags, by name. */
export const Tag = WireTag;

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
      case "function":
        return `[Function ${this.name || "(anonymous)"}]`;
      case "symbol":
        return `Symbol(${this.name ?? ""})`;
      case "accessor":
        return "[Getter/Setter]";
      case "proxy":
        return "[Proxy]";
      case "promise":
        return "Promise {}";
      case "weak collection":
        return "[WeakMap/WeakSet/WeakRef]";
      default:
        return "[object]";
    }
  }
}

// How `util.inspect` shows one: `[Function name]`... (set here, not in the class, so the declared
// types need no Node.js type definitions).
Object.defineProperty(GuestOpaque.prototype, inspect.custom, {
  value(this: GuestOpaque): string {
    return this.toString();
  },
});

/** @internal A constructor of the views the wire format carries. */
export type ViewConstructor = new (buffer: ArrayBuffer, byteOffset: number, length: number) => ArrayBufferView;

const float16Ctor = (globalThis as { Float16Array?: ViewConstructor }).Float16Array;

/** @internal The view constructor of each typed kind, by its number (Float16 only where Node.js has it). */
export const VIEW_CTORS: readonly (ViewConstructor | undefined)[] = (() => {
  const byName: Record<keyof typeof TypedKind, ViewConstructor | undefined> = {
    Int8: Int8Array,
    Uint8: Uint8Array,
    Uint8Clamped: Uint8ClampedArray,
    Int16: Int16Array,
    Uint16: Uint16Array,
    Int32: Int32Array,
    Uint32: Uint32Array,
    Float32: Float32Array,
    Float64: Float64Array,
    BigInt64: BigInt64Array,
    BigUint64: BigUint64Array,
    Float16: float16Ctor,
    DataView,
  };
  const ctors: (ViewConstructor | undefined)[] = [];
  for (const name of Object.keys(byName) as (keyof typeof TypedKind)[]) ctors[TypedKind[name]] = byName[name];
  return ctors;
})();
