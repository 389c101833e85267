/**
 * A job's request, as it crosses into the addon: its numbers go into the shared request slots
 * (native/boundary.h QJSN_REQUEST_SLOTS) by name, just before the call that reads them, so none
 * costs a Node-API call or an allocation; only code, filename and byte payloads are arguments.
 * The options of a new sandbox cross the same way (QJSN_CREATE_SLOTS).
 */
import {
  CreateSlot,
  native,
  RequestSlot,
  type NativeDispatcher,
  type NativeHandle,
  type NativePrimitiveDispatcher,
} from "./native.js";
import { createRemoteHandle } from "./process-tier/pool.js";
import { RENDER_OPTIONS } from "./render.js";
import type { EvalOptions, ResolvedSandboxOptions } from "./types.js";

/** A thrown non-Error value is described within this many characters (rendering runs on the main thread). */
export const MAX_THROWN_CHARS = 16_384;

/** The options a native sandbox is created with. */
export type HandleOptions = Pick<
  ResolvedSandboxOptions,
  | "memoryLimitBytes"
  | "maxStackSizeBytes"
  | "captureConsole"
  | "maxConsoleBytes"
  | "copyLimitBytes"
  | "maxHostCallsInFlight"
>;

/**
 * A native sandbox with options `o`. The handle holds both dispatchers weakly (they close over the
 * Sandbox that owns it): the caller keeps them reachable for as long as it uses the handle.
 */
export function createHandle(
  o: ResolvedSandboxOptions,
  dispatcher: NativeDispatcher,
  primitiveDispatcher: NativePrimitiveDispatcher,
): NativeHandle {
  if (o.isolation === "process") return createRemoteHandle(o, dispatcher);
  const c = native.createSlots;
  c[CreateSlot.memoryLimitBytes] = o.memoryLimitBytes;
  c[CreateSlot.maxStackSizeBytes] = o.maxStackSizeBytes;
  c[CreateSlot.captureConsole] = o.captureConsole ? 1 : 0;
  c[CreateSlot.maxConsoleBytes] = o.maxConsoleBytes;
  c[CreateSlot.copyLimitBytes] = o.copyLimitBytes;
  c[CreateSlot.maxHostCallsInFlight] = o.maxHostCallsInFlight;
  return new native.SandboxHandle(dispatcher, primitiveDispatcher);
}

/**
 * The parts of a copy for display that `renderValue(value, chars)` renders to the same text as
 * the exact copy. The renderer charges at least 2 characters for every value and key it shows, so
 * within `chars` it never reaches a part past `chars / 2` (one more: the item after the ones
 * shown, whose type `inspect` looks at).
 */
function displayParts(chars: number): number {
  return Math.min(Math.ceil(chars / 2) + 1, 0xffff_ffff); // the addon reads a u32
}

/**
 * Requests an eval (`kind` Eval, or EvalThenSnapshot with `snapshotMaxBytes`) of the sandbox
 * numbered `sandboxId`, under `budgetMs`, with what `o` asks for: described unserializable
 * values, streamed console lines, inline, and a copy for display of the result and of what it
 * threw when `o.displayChars` is set (nothing nested deeper than RENDER_OPTIONS.depth; a thrown
 * value other than an Error becomes the error's message, rendered within MAX_THROWN_CHARS).
 */
export function requestEval(
  kind: number,
  sandboxId: number,
  evalId: number,
  budgetMs: number,
  o: EvalOptions,
  answerNow: boolean,
  snapshotMaxBytes = 0,
): void {
  const r = native.request;
  r[RequestSlot.kind] = kind;
  r[RequestSlot.sandboxId] = sandboxId;
  r[RequestSlot.evalId] = evalId;
  r[RequestSlot.budgetMs] = budgetMs;
  r[RequestSlot.describe] = o.unserializable === "describe" ? 1 : 0;
  r[RequestSlot.streamConsole] = o.onConsole !== undefined ? 1 : 0;
  r[RequestSlot.runInline] = o.inline === true ? 1 : 0;
  r[RequestSlot.answerNow] = answerNow ? 1 : 0;
  const chars = o.displayChars;
  if (chars === undefined) {
    r[RequestSlot.resultParts] = 0;
    r[RequestSlot.thrownParts] = 0;
    r[RequestSlot.displayDepth] = 0;
  } else {
    r[RequestSlot.resultParts] = displayParts(chars);
    r[RequestSlot.thrownParts] = displayParts(Math.max(chars, MAX_THROWN_CHARS));
    r[RequestSlot.displayDepth] = RENDER_OPTIONS.depth;
  }
  r[RequestSlot.snapshotMaxBytes] = snapshotMaxBytes;
}

/**
 * Requests a snapshot job (`kind` JobKind.WriteSnapshot or ReadSnapshot): a write (`maxBytes`, the cap on the body) or a read (re-created
 * functions and classes run under `budgetMs`); `evalId` names an async one.
 */
export function requestSnapshot(kind: number, evalId: number, budgetMs: number, maxBytes: number): void {
  const r = native.request;
  r[RequestSlot.kind] = kind;
  r[RequestSlot.evalId] = evalId;
  r[RequestSlot.budgetMs] = budgetMs;
  r[RequestSlot.snapshotMaxBytes] = maxBytes;
}
