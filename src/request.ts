/**
 * A job's request, as it crosses into the addon: its numbers go into the shared request slots
 * (native/boundary.h QJSN_REQUEST_SLOTS) by name, just before the call that reads them, so none
 * costs a Node-API call or an allocation; only code, filename and byte payloads are arguments.
 * The options of a new sandbox cross the same way (QJSN_CREATE_SLOTS), and so do the numbers of
 * the handle's other calls (QJSN_CALL_SLOTS): every handle method is called through here.
 */
import {
  CallSlot,
  CreateSlot,
  type HostCallAnswer,
  native,
  RequestSlot,
  type NativeDispatcher,
  type NativeError,
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

const calls = native.callSlots;

/** Stops `handle`'s async eval `evalId` for `reason` (NativeStop.WallBudget or Abort); a later eval is never stopped. */
export function stopEval(handle: NativeHandle, reason: number, evalId: number): void {
  calls[CallSlot.reason] = reason;
  calls[CallSlot.evalId] = evalId;
  handle.stop();
}

/**
 * Settles the async host call `callId` with `result` (`ok`: a value, else `[name, message]`); with
 * `collect`, the guest's next host call may be dispatched before this returns.
 */
export function settleHostCall(
  handle: NativeHandle,
  callId: number,
  ok: boolean,
  result: HostCallAnswer | null,
  collect: boolean,
): void {
  calls[CallSlot.callId] = callId;
  calls[CallSlot.ok] = ok ? 1 : 0;
  calls[CallSlot.collect] = collect ? 1 : 0;
  handle.settle(result);
}

/** Copies a piece of the encoded result (`totalBytes` in all) of the async host call `callId`. */
export function appendHostResult(handle: NativeHandle, callId: number, piece: Uint8Array, totalBytes: number): void {
  calls[CallSlot.callId] = callId;
  calls[CallSlot.resultBytes] = totalBytes;
  handle.appendResult(piece);
}

/** Answers the sync host call `token` the dispatcher left unanswered, as the dispatcher would have. */
export function answerSyncCall(handle: NativeHandle, token: number, result: HostCallAnswer): void {
  calls[CallSlot.callId] = token;
  handle.answerSync(result);
}

/** Defines the host function numbered `fnId` at `path` (`async`: its guest calls return promises). */
export function defineHostFunction(
  handle: NativeHandle,
  path: string,
  fnId: number,
  async: boolean,
): NativeError | undefined {
  calls[CallSlot.fnId] = fnId;
  calls[CallSlot.async] = async ? 1 : 0;
  return handle.defineFunction(path);
}

/** Installs the host function numbered `fnId` as the frozen global `name` (see NativeHandle.defineFrozenFunction). */
export function defineFrozenHostFunction(handle: NativeHandle, name: string, fnId: number): boolean | NativeError {
  calls[CallSlot.fnId] = fnId;
  return handle.defineFrozenFunction(name);
}

/** Up to `limit` own string-keyed names of the guest's global object, or `BUSY`. */
export function globalNamesOf(handle: NativeHandle, limit: number): string[] | NativeError {
  calls[CallSlot.limit] = limit;
  return handle.globalNames();
}

/** Sets the guest's clock: `epochMs` when `fixed`, else the real time; local time is UTC when `localTimeUtc`. */
export function setGuestClock(
  handle: NativeHandle,
  fixed: boolean,
  epochMs: number,
  localTimeUtc: boolean,
): NativeError | undefined {
  calls[CallSlot.clockFixed] = fixed ? 1 : 0;
  calls[CallSlot.epochMs] = epochMs;
  calls[CallSlot.localTimeUtc] = localTimeUtc ? 1 : 0;
  return handle.setClock();
}

/** The clock a handle was last given (fixed, epoch ms, local time UTC): a clock that did not change costs no call into the addon. */
export class GuestClockInForce {
  #last: [boolean, number, boolean] | undefined;

  /** Gives `handle` a clock fixed at `ms` (epoch ms), or the real one when undefined, unless it has it already. */
  set(handle: NativeHandle, ms: number | undefined, localTimeUtc: boolean): void {
    const fixed = ms !== undefined;
    const epochMs = ms ?? 0;
    const last = this.#last;
    if (last && last[0] === fixed && last[1] === epochMs && last[2] === localTimeUtc) return;
    // A busy engine refuses it (and then the eval too): nothing is in force then.
    const refused = setGuestClock(handle, fixed, epochMs, localTimeUtc) !== undefined;
    this.#last = refused ? undefined : [fixed, epochMs, localTimeUtc];
  }
}

/** Seeds the guest's Math.random (an integer below 2**53). */
export function setGuestRandomSeed(handle: NativeHandle, seed: number): NativeError | undefined {
  calls[CallSlot.seed] = seed;
  return handle.setRandomSeed();
}
