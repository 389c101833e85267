/**
 * What the decoder (src/decoder.ts) records about the host values it makes, for the renderer
 * (src/render.ts) and the outcome messages (src/outcomes.ts): the keys of an object with many of
 * them, how many entries a container a copy for display cut short really had, the class name of a
 * guest class instance, and the text of an Error made from a guest one. The host values are plain
 * objects with nothing of the guest's attached, so these facts live beside them in WeakMaps that
 * only the decoder writes (through the recorders here) and that hold nothing alive. They are apart
 * from the decoder because they are read by code that never decodes.
 */

const keysOfObjects = new WeakMap<object, KeysAtDecode>();
const sizesOfCutCollections = new WeakMap<Map<unknown, unknown> | Set<unknown>, number>();
const classNames = new WeakMap<object, string>();

/** What the decoder recorded of an object with many keys, or of one a copy for display cut short. */
export interface KeysAtDecode {
  /** Its own keys, in order, for an object that holds many (undefined for one that holds few). */
  readonly keys: readonly string[] | undefined;
  /** How many keys the guest's object had: more than it holds when a copy for display cut it short. */
  readonly count: number;
}

/** Records, for the decoder, what {@link keysAtDecode} answers for `object`. */
export function recordKeysAtDecode(object: object, keys: KeysAtDecode): void {
  keysOfObjects.set(object, keys);
}

/** Records, for the decoder, how many entries the guest's collection had when a copy cut it short. */
export function recordSizeAtDecode(collection: Map<unknown, unknown> | Set<unknown>, size: number): void {
  sizesOfCutCollections.set(collection, size);
}

/** Records, for the decoder, the guest class name of an object it made. */
export function recordClassNameAtDecode(object: object, name: string): void {
  classNames.set(object, name);
}

/**
 * What the decoder recorded of an object's keys (undefined for an object it did not make, or that
 * holds all its keys and few of them): for a renderer that shows the first few without listing
 * every key again, and counts the ones a copy for display left out.
 */
export function keysAtDecode(object: object): KeysAtDecode | undefined {
  return keysOfObjects.get(object);
}

/**
 * How many entries the guest's Map or Set had: more than `collection.size` when a copy for
 * display cut it short.
 */
export function sizeAtDecode(collection: Map<unknown, unknown> | Set<unknown>): number {
  return sizesOfCutCollections.get(collection) ?? collection.size;
}

/**
 * The class name of a guest object that was an instance of a class (`P` for `new P()`), for a
 * renderer that shows it as `util.inspect` does (`P { x: 1 }`). The host value itself is a plain
 * object: no guest prototype or constructor crosses the boundary.
 */
export function classNameAtDecode(object: object): string | undefined {
  return classNames.get(object);
}

/** Longest guest stack (frames) a host Error keeps: QuickJS keeps 10 frames by default. */
const MAX_GUEST_STACK_CHARS = 8 * 1024;

/**
 * The `stack` of a host Error made from a guest one: `Name: message` and the guest's frames, as
 * Node shows an error (QuickJS's own stacks hold only the frames). The frames are guest text,
 * cut to {@link MAX_GUEST_STACK_CHARS}; no host frame is ever in it.
 */
export function guestErrorStack(name: string, message: string, frames: unknown): string {
  const head = errorHead(name, message);
  if (typeof frames !== "string" || frames === "") return head;
  const shown =
    frames.length > MAX_GUEST_STACK_CHARS
      ? `${frames.slice(0, MAX_GUEST_STACK_CHARS)}\n    ... ${frames.length - MAX_GUEST_STACK_CHARS} more characters`
      : frames;
  if (shown.startsWith(head)) return shown.trimEnd();
  return `${head}\n${shown.trimEnd()}`;
}

/** What `Error.prototype.toString` gives: `Name: message`, or either alone when the other is empty. */
export function errorHead(name: string, message: string): string {
  if (message === "") return name;
  return name === "" ? message : `${name}: ${message}`;
}
