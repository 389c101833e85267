/**
 * Bounded rendering of values that came out of a sandbox, the way Node's `util.inspect` shows them.
 *
 * `util.inspect` walks every key of an object before any cut, repeats a shared sub-tree at every
 * reference (a few KB of guest data with shared arrays renders as terabytes), and prints a BigInt's
 * every digit. All of that runs on the Node main thread, which every session shares. Here a value is
 * first copied into a *pruned* twin within a budget of characters: the walk stops once the budget
 * is spent, cut containers and strings carry a `... N more items` marker, and huge BigInts keep a
 * head and a tail of their digits. `util.inspect` then renders the twin, so work on the main thread
 * grows with the budget, not with the guest's data. Values within the budget render exactly as
 * `util.inspect` renders them.
 */
import { formatWithOptions, inspect, type InspectOptions } from "node:util";
import { classNameAtDecode, GuestOpaque, keysAtDecode, sizeAtDecode } from "./marshal.js";
import { SANDBOX_DEFAULTS } from "./options.js";

/** How results are shown: `util.inspect` with these options, within a character budget. */
export const RENDER_OPTIONS = {
  depth: 6,
  maxArrayLength: 200,
  maxStringLength: 10_000,
  breakLength: 100,
  compact: 3,
  sorted: false,
  getters: false,
  showHidden: false,
  colors: false,
  customInspect: true,
} as const satisfies InspectOptions;

/** Console arguments are shown the way Node's `console.log` shows them, nested to this depth. */
const CONSOLE_OPTIONS = { depth: 6, colors: false } as const satisfies InspectOptions;

/** BigInts up to this many bits (~9,900 digits) are printed exactly; larger ones by head and tail. */
const EXACT_BIGINT_BITS = 32_768;
/** Leading digits shown: a double's log10 of the top 64 bits gets about 10 of them right. */
const BIGINT_HEAD_DIGITS = 10;
const BIGINT_TAIL_DIGITS = 12;

/** Text that `util.inspect` prints as it is (a cut marker, a cut string or BigInt). */
class Shown {
  constructor(readonly text: string) {}
  [inspect.custom](): string {
    return this.text;
  }
}

/** Options of {@link renderValue}. */
export interface RenderOptions {
  /** ANSI colours, as `util.inspect` adds them for a terminal. Default false. */
  colors?: boolean;
}

/**
 * Renders `value` like `util.inspect` with {@link RENDER_OPTIONS}, doing work proportional to
 * `maxChars` (default: the eval tool's 4,000): whatever lies past the budget is replaced by
 * `... N more items` markers. A guest Error shows as Node shows one (`TypeError: bad\n    at
 * <eval> ...`), an instance of a guest class with its class name (`P { x: 1 }`).
 */
export function renderValue(
  value: unknown,
  maxChars: number = SANDBOX_DEFAULTS.renderChars,
  options: RenderOptions = {},
): string {
  const budget = Number.isFinite(maxChars) ? maxChars : SANDBOX_DEFAULTS.renderChars;
  const inspectOptions = options.colors === true ? { ...RENDER_OPTIONS, colors: true } : RENDER_OPTIONS;
  return inspect(new Pruner(budget, RENDER_OPTIONS).copy(value, 0), inspectOptions);
}

/** Values in one console call render to at most about this many characters (a few ms of work). */
export const MAX_CONSOLE_CALL_CHARS = 16 * 1024;

/**
 * Formats console arguments like `console.log` (`util.formatWithOptions`, `%s`/`%o` included)
 * within `maxChars`. Strings are copied as they are (cheap); other values are rendered within at
 * most {@link MAX_CONSOLE_CALL_CHARS} per call, which bounds the main thread's work per call.
 */
export function formatConsoleArgs(args: readonly unknown[], maxChars: number): string {
  const pruner = new Pruner(Math.min(maxChars, MAX_CONSOLE_CALL_CHARS), {
    maxArrayLength: 100,
    maxStringLength: 10_000,
    depth: CONSOLE_OPTIONS.depth,
  });
  let textLeft = Math.max(0, maxChars);
  // Top-level strings are printed raw, not quoted: cut them as text.
  const pruned = args.map((arg) => {
    if (typeof arg !== "string") return pruner.copy(arg, 0);
    const shown = textLeft;
    textLeft = Math.max(0, textLeft - arg.length);
    return arg.length <= shown ? arg : `${arg.slice(0, shown)}... ${arg.length - shown} more characters`;
  });
  return formatWithOptions(CONSOLE_OPTIONS, ...pruned);
}

/** Decimal text of a BigInt, exact up to {@link EXACT_BIGINT_BITS} bits, else head…tail and digit count. */
export function bigintText(value: bigint): string {
  const negative = value < 0n;
  const magnitude = negative ? -value : value;
  const hex = magnitude.toString(16); // linear, unlike decimal conversion
  const bits = hex.length * 4 - (Math.clz32(Number.parseInt(hex[0]!, 16)) - 28);
  if (bits <= EXACT_BIGINT_BITS) return `${value}n`;
  // log10 from the top 64 bits; the tail is one division by a small power of ten.
  const shift = bits - 64;
  const log10 = Math.log10(Number(magnitude >> BigInt(shift))) + shift * Math.log10(2);
  const digits = Math.floor(log10) + 1;
  const head = Math.floor(10 ** (log10 - Math.floor(log10) + BIGINT_HEAD_DIGITS - 1))
    .toString()
    .slice(0, BIGINT_HEAD_DIGITS);
  const tail = (magnitude % 10n ** BigInt(BIGINT_TAIL_DIGITS)).toString().padStart(BIGINT_TAIL_DIGITS, "0");
  return `${negative ? "-" : ""}${head}...${tail}n (${digits.toLocaleString("en-US")} digits)`;
}

interface PruneLimits {
  depth: number;
  maxArrayLength: number;
  maxStringLength: number;
}

/**
 * Copies a value within a budget of characters, mirroring `util.inspect`'s walk: every reference
 * is visited again (as inspect repeats shared sub-trees), cycles stay cycles, nothing deeper than
 * `depth` is entered. Each visited thing is charged about what it prints.
 */
class Pruner {
  #left: number;
  readonly #limits: PruneLimits;
  readonly #ancestors = new Map<object, object>();
  readonly #prototypes = new Map<string, object>();

  constructor(maxChars: number, limits: PruneLimits) {
    this.#left = Math.max(0, maxChars);
    this.#limits = limits;
  }

  copy(value: unknown, depth: number): unknown {
    switch (typeof value) {
      case "string":
        return this.#string(value);
      case "bigint": {
        const text = bigintText(value);
        this.#left -= text.length;
        return text.endsWith("digits)") ? new Shown(text) : value;
      }
      case "object":
        if (value === null) break;
        return this.#object(value, depth);
      default:
        break;
    }
    this.#left -= 10;
    return value;
  }

  get #spent(): boolean {
    return this.#left <= 0;
  }

  #string(value: string): unknown {
    const shown = Math.min(value.length, this.#limits.maxStringLength);
    if (shown + 2 <= this.#left) {
      this.#left -= shown + 2;
      return value;
    }
    const keep = Math.max(0, this.#left - 2);
    this.#left = 0;
    return new Shown(`${inspect(value.slice(0, keep))}... ${value.length - keep} more characters`);
  }

  #object(value: object, depth: number): unknown {
    const seen = this.#ancestors.get(value);
    if (seen !== undefined) {
      this.#left -= 14;
      return seen; // a cycle: util.inspect prints [Circular *n]
    }
    if (value instanceof GuestOpaque || value instanceof Date) {
      this.#left -= 30;
      return value;
    }
    if (value instanceof RegExp)
      return this.#leaf(
        value,
        value.source.length + 10,
        () => `/${value.source.slice(0, Math.max(0, this.#left))}.../${value.flags}`,
      );
    if (value instanceof Error) {
      // Shown as its stack, which the decoder starts with `Name: message` as Node's do: inspect
      // would otherwise print `Error [ValidationError]: ...` for a name its constructor lacks.
      const stack = typeof value.stack === "string" ? value.stack : `${value.name}: ${value.message}`;
      const shown = this.#leaf(
        value,
        stack.length + 10,
        () => `${stack.slice(0, Math.max(0, this.#left))}... ${stack.length - Math.max(0, this.#left)} more characters`,
      );
      return shown === value ? new Shown(stack) : shown;
    }
    if (ArrayBuffer.isView(value) || value instanceof ArrayBuffer) {
      // inspect prints at most maxArrayLength elements or bytes of these.
      this.#left -= this.#limits.maxArrayLength * 4;
      return value;
    }
    // Past the depth limit inspect prints `[Array]`, `[Object]`... for a non-empty container: a
    // twin holding one placeholder prints the same.
    const beyond = depth > this.#limits.depth;
    this.#left -= 4 + 2 * depth;
    if (Array.isArray(value)) return this.#array(value, depth, beyond);
    if (value instanceof Map) return this.#map(value, depth, beyond);
    if (value instanceof Set) return this.#set(value, depth, beyond);
    return this.#plain(value as Record<string, unknown>, depth, beyond);
  }

  /** A prototype whose constructor is named `name`: inspect prints `name { ... }` for objects made from it. */
  #prototypeNamed(name: string): object {
    let prototype = this.#prototypes.get(name);
    if (prototype === undefined) {
      const ctor = class {};
      Object.defineProperty(ctor, "name", { value: name });
      prototype = ctor.prototype as object;
      this.#prototypes.set(name, prototype);
    }
    this.#left -= name.length;
    return prototype;
  }

  #leaf(value: object, cost: number, cut: () => string): unknown {
    if (cost <= this.#left) {
      this.#left -= cost;
      return value;
    }
    const shown = new Shown(cut());
    this.#left = 0;
    return shown;
  }

  #enter<T extends object>(value: object, twin: T, fill: () => void): T {
    this.#ancestors.set(value, twin);
    try {
      fill();
    } finally {
      this.#ancestors.delete(value);
    }
    return twin;
  }

  #array(value: unknown[], depth: number, beyond: boolean): unknown[] {
    const twin: unknown[] = [];
    if (beyond) return value.length === 0 ? twin : [undefined];
    return this.#enter(value, twin, () => {
      const limit = Math.min(value.length, this.#limits.maxArrayLength);
      let index = 0;
      let dense = true;
      for (; index < limit && !this.#spent; index++) {
        if (Object.hasOwn(value, index)) twin[index] = this.copy(value[index], depth + 1);
        else {
          dense = false;
          this.#left -= 1;
        }
      }
      // A full dense head keeps the real length, so inspect prints its own `... n more items`.
      if (index === this.#limits.maxArrayLength && dense) {
        twin.length = value.length;
        // inspect aligns numbers right only when the item after the cut is a number too.
        const next: unknown = value[index];
        if (typeof next === "number" || typeof next === "bigint") twin[index] = next;
      } else if (index < value.length) {
        // Holes stay holes (`<n empty items>`); what the budget or the item cap left out is counted.
        twin.length = index;
        twin.push(new Shown(`... ${value.length - index} more item${value.length - index === 1 ? "" : "s"}`));
      } else {
        twin.length = value.length;
      }
    });
  }

  // inspect shows at most maxArrayLength entries of a Map or Set: a cut one keeps one fewer, so
  // that inspect also shows the marker that counts the rest (else it would print its own
  // `... 1 more item` for the marker).
  #entriesShown(size: number): number {
    return size > this.#limits.maxArrayLength ? this.#limits.maxArrayLength - 1 : size;
  }

  // A copy for display may hold fewer entries than the guest's collection had: sizeAtDecode counts them all.
  #map(value: Map<unknown, unknown>, depth: number, beyond: boolean): Map<unknown, unknown> {
    const twin = new Map<unknown, unknown>();
    const size = sizeAtDecode(value);
    if (beyond) return size === 0 ? twin : twin.set(undefined, undefined);
    return this.#enter(value, twin, () => {
      const limit = this.#entriesShown(size);
      for (const [key, item] of value) {
        if (twin.size >= limit || this.#spent) break;
        twin.set(this.copy(key, depth + 1), this.copy(item, depth + 1));
      }
      const more = size - twin.size;
      if (more > 0) twin.set(new Shown("..."), new Shown(`${more} more entr${more === 1 ? "y" : "ies"}`));
    });
  }

  #set(value: Set<unknown>, depth: number, beyond: boolean): Set<unknown> {
    const twin = new Set<unknown>();
    const size = sizeAtDecode(value);
    if (beyond) return size === 0 ? twin : twin.add(undefined);
    return this.#enter(value, twin, () => {
      const limit = this.#entriesShown(size);
      for (const item of value) {
        if (twin.size >= limit || this.#spent) break;
        twin.add(this.copy(item, depth + 1));
      }
      const more = size - twin.size;
      if (more > 0) twin.add(new Shown(`... ${more} more item${more === 1 ? "" : "s"}`));
    });
  }

  #plain(value: Record<string, unknown>, depth: number, beyond: boolean): Record<string, unknown> {
    const className = classNameAtDecode(value);
    const twin: Record<string, unknown> =
      Object.getPrototypeOf(value) === null
        ? Object.create(null)
        : className === undefined
          ? {}
          : Object.create(this.#prototypeNamed(className));
    // for-in lists every key of an object with many keys before the first one; the decoder kept
    // the keys of those it made, so the walk can stop where the budget does, and counted the keys
    // of objects a copy for display cut short.
    const known = keysAtDecode(value);
    if (beyond) {
      if (known ? known.count > 0 : !ownKeysIn(value).next().done) return Object.assign(twin, { _: undefined });
      return twin;
    }
    return this.#enter(value, twin, () => {
      let more = 0;
      let index = 0;
      for (const key of known?.keys ?? ownKeysIn(value)) {
        index++;
        if (!Object.hasOwn(value, key)) continue;
        if (this.#spent || key.length + 2 > this.#left) {
          this.#left = 0;
          if (known) {
            more += known.count - index + 1; // the keys a copy for display dropped included
            break;
          }
          more++;
          continue;
        }
        this.#left -= key.length + 2;
        Object.defineProperty(twin, key, {
          value: this.copy(value[key], depth + 1),
          enumerable: true,
          writable: true,
          configurable: true,
        });
      }
      // Keys a copy for display dropped, should the budget outlast the ones it kept (it does not
      // within the budget the copy was made for): counted, never hidden silently.
      if (known && more === 0) more = known.count - index;
      if (more > 0) {
        let marker = "...";
        while (Object.hasOwn(twin, marker)) marker += ".";
        Object.defineProperty(twin, marker, {
          value: new Shown(`${more} more key${more === 1 ? "" : "s"}`),
          enumerable: true,
          configurable: true,
        });
      }
    });
  }
}

/** The own enumerable string keys of `value`, in for-in order. */
function* ownKeysIn(value: object): Generator<string> {
  for (const key in value) if (Object.hasOwn(value, key)) yield key;
}
