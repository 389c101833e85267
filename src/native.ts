/**
 * The one place that loads the compiled addon. node-gyp-build finds a prebuilt binary in
 * prebuilds/ or a local build in build/Release, so the package works even when its install
 * script never ran. The surface is internal: only the engine files of src/ (sandbox, host calls,
 * outcomes, snapshots, validation) talk to it.
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import type { SandboxErrorCode } from "./errors.js";
import type { ConsoleLevel, GuestOpaqueKind, SourceCode } from "./types.js";

/** The array the addon resolves a job with, by the contract's `outcomeSlot`: read only by {@link outcomeOf}. */
export type NativeOutcomeSlots = unknown[];

/** The array a native snapshot read or write answers with, by `snapshotResultSlot`: read only by {@link snapshotResultOf}. */
export type NativeSnapshotSlots = unknown[];

/** One job's outcome, read by slot name ({@link outcomeOf}), or built by src/outcomes.ts for an eval answered on the spot. */
export interface NativeOutcome {
  status: NativeStatus;
  /** The result (Ok) or what was thrown (GuestError, SyntaxError), as wire bytes. */
  value: Buffer | undefined;
  message: string;
  stop: number;
  /** Console records as wire bytes, when there are any. */
  console: Buffer | undefined;
  consoleTruncated: boolean;
  executionMs: number;
  hostCalls: number;
  memoryUsedBytes: number;
  peakMemoryBytes: number;
  /** What an EvalThenSnapshot or WriteSnapshot job wrote, when the write ran. */
  written?: NativeSnapshotWrite;
  /** What a ReadSnapshot job read, when the read ran. */
  read?: NativeSnapshotRead;
}

/** Result of a native snapshot write: its status, the body (Ok) or what failed, and the placeholders as flat [name, type, ...]. */
export interface NativeSnapshotWrite {
  status: number;
  body?: Buffer;
  message?: string;
  notRestored: string[];
}

/** Result of a native snapshot read: as a write's, with no body. */
export type NativeSnapshotRead = Omit<NativeSnapshotWrite, "body">;

/**
 * Called by the addon on the main thread for each guest call of a host function. The arguments
 * are in the handle's exchange buffer (`argLength` bytes) unless they did not fit, in which case
 * `args` holds them. A sync call answers with the result's byte count in the exchange buffer, a
 * Buffer, or `[name, message]` for an error; a sync call whose guest waits on an executor thread
 * comes with a `callId` and may answer `undefined` instead, then later through
 * {@link NativeHandle.answerSync} (the guest waits meanwhile). `kind` is a {@link DispatchKind}:
 * a sync call, an async call, or a console line of the running eval (`fnId` is its level), sent
 * only for evals started with `streamConsole`.
 */
export type NativeDispatcher = (
  kind: number,
  fnId: number,
  callId: number,
  argLength: number,
  args: Buffer | undefined,
  evalId: number,
) => HostCallAnswer | undefined;

/** A host call's result as the addon reads it: its byte count in the exchange buffer, its bytes, or `[name, message]`. */
export type HostCallAnswer = number | Buffer | [string, string];

/**
 * The fast path of a synchronous host call from an inline eval whose arguments are all primitives
 * (at most 3; strings of at most 256 UTF-16 units). Numbers cross through `primitiveSlots` (at the
 * positions of {@link PrimitiveSlot}), so that none costs a Node-API call: the `call` slot holds
 * `fnId * 32 + numberBits * 4 + argc`, where bit i of `numberBits` says argument i is in slot
 * `arg<i>`; the other arguments arrive as they are. Answers a number by writing it to the `result`
 * slot and 1 to `hasResult`, any other primitive as it is, `[bytes]` for any other result (the
 * codec's answer, as {@link NativeDispatcher}'s), or `[name, message]` for an error.
 */
export type NativePrimitiveDispatcher = (a0: unknown, a1: unknown, a2: unknown) => unknown;

/**
 * An eval answered on the spot (`evalSync`, or `start` with `answerNow`): its numbers are in
 * `syncStats` (at the positions of {@link StatsSlot}) and a value that fitted in `exchange`; what
 * did not fit comes back in an array at the positions of {@link AnsweredSlot}.
 */
export type AnsweredHere = readonly unknown[] | undefined;

export interface NativeHandle {
  /** The sandbox's number, for {@link NativeModule.evalSync}. */
  readonly id: number;
  /** Process tier only: its helper died, and every call fails with `WORKER_LOST`. */
  readonly lost?: boolean;
  /** Process tier only: the helper's process id. */
  readonly processId?: number;
  /**
   * Process tier only: runs the Eval request in the request slots and answers as
   * {@link NativeModule.evalSync} does, as an outcome (the in-process tier uses the module function).
   */
  evalSync?(code: SourceCode, filename: string): NativeOutcome;
  /**
   * Starts the job in the request slots ({@link RequestSlot}; src/request.ts writes them), with the
   * payloads of its kind: an eval's code and filename (and, for EvalThenSnapshot, the names a
   * snapshot leaves out), a write's excluded names, a read's body. Runs on an executor thread, or
   * with `runInline` on the calling thread (slices and host-call dispatch in turn). With
   * `answerNow`, an eval that ends while the call briefly waits for it (nothing of its sandbox
   * queued before its outcome) is answered as `evalSync` answers, not with a promise. With a copy
   * for display, the result or thrown value may come back cut short, each container cut short
   * ending in a `More` count. Snapshot jobs carry their result in the outcome's snapshot slot.
   * `BUSY` while a job is active, `BROKEN` once the watchdog gave up on one.
   */
  start(
    code: SourceCode,
    filename: string,
    excludedNames?: string[],
  ): Promise<NativeOutcomeSlots> | AnsweredHere | NativeError;
  start(payload: string[] | Uint8Array): Promise<NativeOutcomeSlots> | NativeError;
  /** Stops the async eval `evalId` of the call slots ({@link CallSlot}) for their `reason`. */
  stop(): void;
  /**
   * Settles the async host call `callId` of the call slots (`ok`: `result` is a value, else
   * `[name, message]`, `null`: what {@link NativeHandle.appendResult} gathered); with `collect`, the guest's next host call may be dispatched before this returns.
   */
  settle(result: HostCallAnswer | null): void;
  /**
   * Copies a piece of the result of the async host call `callId` of the call slots, whose whole
   * encoding is `resultBytes` long; the call is then settled with a `null` result.
   */
  appendResult(piece: Uint8Array): void;
  /** Answers the sync host call the dispatcher left unanswered (its token in the `callId` slot), as the dispatcher would have. */
  answerSync(result: HostCallAnswer): void;
  /** Defines the host function `fnId` of the call slots (`async`: its calls return promises) at `path`. */
  defineFunction(path: string): NativeError | undefined;
  /** Installs the host function `fnId` of the call slots as the frozen global `name`. true: installed; false: the guest keeps its own global `name`; an error: why nothing was installed. */
  defineFrozenFunction(name: string): boolean | NativeError;
  setGlobal(name: string, bytes: Buffer): NativeError | undefined;
  /** The global's own data property as wire bytes; `BUSY`, `STACK_OVERFLOW` or `UNSERIALIZABLE` (an accessor, a value that cannot be copied). */
  getGlobal(name: string): Buffer | NativeError;
  /** Up to `limit` (a call slot) own string-keyed property names of the global object, or `BUSY`. */
  globalNames(): string[] | NativeError;
  memoryUsage(): [used: number, peak: number, limit: number];
  dispose(): void;
  /** The WriteSnapshot request on this thread: [status, body | message, flat [name, type, ...] of placeholders], or `BUSY`. */
  writeSnapshot(excludedNames: string[]): NativeSnapshotSlots | NativeError;
  /** The ReadSnapshot request on this thread: [status, undefined | message, flat [name, type, ...] of placeholders], or `BUSY`. */
  readSnapshot(body: Uint8Array): NativeSnapshotSlots | NativeError;
  /** The clock of the call slots (`clockFixed`, `epochMs`, `localTimeUtc`); `BUSY` during an eval, `INVALID_ARGUMENT` for a time outside the Date range. */
  setClock(): NativeError | undefined;
  /** The `seed` of the call slots; `BUSY` during an eval, `INVALID_ARGUMENT` for a seed that is not an integer below 2**53. */
  setRandomSeed(): NativeError | undefined;
}

/** Frames a helper sent that answer no direct call, and, once, `[signal, exitCode]` when it ended. */
export type HelperEvents = (frames: Buffer[], lost: HelperLoss | undefined) => void;

/** How a helper ended: its signal, its exit code, and whether it sent a frame over the limit the parent set. */
export type HelperLoss = [signal: number, exitCode: number, overLimit: boolean];

/** The addon's end of the channel to one helper process. */
export interface NativeHelperChannel {
  /** Writes a frame; false when it could not be written (the helper is then killed). */
  send(frame: Buffer): boolean;
  /** Writes `frame` (unless empty) and waits for the next direct frame; undefined once the helper is lost. Kills it after `timeoutMs`. */
  call(frame: Buffer, timeoutMs: number): Buffer | undefined;
  ref(): void;
  unref(): void;
  kill(): void;
  /** The largest frame body the parent expects from now on (at most maxFrameBytes); a larger one kills the helper. */
  setFrameLimit(bytes: number): void;
  /** How the helper ended, once it was reaped (the events callback may not have heard yet). */
  ended(): HelperLoss | undefined;
  readonly pid: number;
}

interface NativeModule {
  /**
   * Throws a {@link NativeError}: `INVALID_ARGUMENT`, or why the runtime could not be created
   * (`OUT_OF_MEMORY`, `STACK_OVERFLOW`, `BROKEN`).
   * The handle holds both dispatchers weakly (they close over the Sandbox that owns it): the
   * caller keeps them reachable for as long as it uses the handle. Once they are collected, a sync
   * host call fails in the guest ("the sandbox is shutting down") and an async one is never answered.
   */
  SandboxHandle: new (
    dispatcher: NativeDispatcher,
    primitiveDispatcher: NativePrimitiveDispatcher,
  ) => NativeHandle;
  /**
   * Runs the Eval request in the request slots inline, in the sandbox its `sandboxId` names,
   * answered on the spot ({@link AnsweredHere}). A function, not a method of the handle: a method
   * call costs a tenth of a trivial eval more.
   */
  evalSync(code: SourceCode, filename: string): AnsweredHere;
  threadStackBytes: number;
  /** [executor threads now, their cap]: one thread per runnable async eval, created on demand. */
  executorThreads(): [threads: number, maxThreads: number];
  /**
   * [bytes handed over and not freed yet, bytes freed so far] by the addon's reaper thread, which
   * frees disposed runtimes with big heaps off the main thread (native/reaper.h).
   */
  reaperBytes(): [pending: number, freed: number];
  /** How many times the addon has handed the C heap's free pages back (once per 64 MiB of freed runtimes). */
  heapTrims(): number;
  /** The buffer shared with the addon for host call arguments and results. */
  exchange: Buffer;
  /** The numbers of the last eval answered on the spot (see {@link AnsweredHere}). */
  syncStats: Float64Array;
  /** The numbers of a primitive host call (see {@link NativePrimitiveDispatcher}). */
  primitiveSlots: Float64Array;
  /** The numbers of the job the next call asks for (see {@link RequestSlot}). */
  request: Float64Array;
  /** The options of the next `new SandboxHandle` (see {@link CreateSlot}). */
  createSlots: Float64Array;
  /** The numbers of the next handle call other than a job's (see {@link CallSlot}). */
  callSlots: Float64Array;
  /**
   * The addon's end of the channel to a helper process (native/helper_channel.h), undefined where
   * helper processes cannot be spawned. `onEvents` receives the frames that answer no direct call,
   * in order, and once, after the last of them, how the helper ended.
   */
  HelperChannel: (new (path: string, args: string[], onEvents: HelperEvents) => NativeHelperChannel) | undefined;
  /** QuickJS-ng version compiled in. */
  engineVersion: string;
  /** The boundary table of native/boundary.h, frozen. */
  contract: NativeContract;
}

/**
 * A failure of a direct call, as the addon returns it, or throws it (an Error with this `code`)
 * when the call cannot return one: the constructor, a call on a disposed handle.
 */
export interface NativeError {
  code: SandboxErrorCode;
  message: string;
}

/** True when `value` is a {@link NativeError} (returned or thrown). */
export function isNativeError(value: unknown): value is NativeError {
  return typeof (value as { code?: unknown } | null | undefined)?.code === "string";
}

type NumberedGroup =
  | "evalStatus"
  | "stopReason"
  | "snapshotStatus"
  | "typedKind"
  | "outcomeSlot"
  | "snapshotResultSlot"
  | "answeredSlot"
  | "statsSlot"
  | "jobKind"
  | "requestSlot"
  | "createSlot"
  | "callSlot"
  | "primitiveSlot"
  | "dispatchKind"
  | "channelFrame"
  | "channelSizes"
  | "wireTag"
  | "copyLimits"
  | "sizes";
type NamedGroup = "errorCodes" | "opaqueKinds" | "consoleLevels";
type NativeContract = Readonly<
  Record<NumberedGroup, Readonly<Record<string, number>>> & Record<NamedGroup, readonly string[]>
>;

const require = createRequire(import.meta.url);
const packageRoot = join(dirname(fileURLToPath(import.meta.url)), "..");

type NodeGypBuild = ((dir: string) => NativeModule) & { resolve(dir: string): string };

// The addon's file: where QUICKJS_NATIVE_BINARY says, else node-gyp-build's pick (a prebuild or build/Release).
function addonFile(): string {
  const override = process.env.QUICKJS_NATIVE_BINARY;
  if (override) return override;
  return (require("node-gyp-build") as NodeGypBuild).resolve(packageRoot);
}

const loadedFrom = addonFile();

/** The loaded addon. */
export const native: NativeModule = require(loadedFrom) as NativeModule;

/** The directory of the loaded addon, where the process tier's helper executable sits beside it. */
export const addonDirectory: string = dirname(loadedFrom);

function contractBroken(what: string): Error {
  return new Error(
    `quickjs-native: the addon's boundary table has no ${what}; the addon and src/ are out of step (rebuild the addon)`,
  );
}

/** The numbers of `names` in the contract's `group`, frozen; throws at load when one is missing. */
function numbered<const K extends string>(group: NumberedGroup, names: readonly K[]): Readonly<Record<K, number>> {
  const source = native.contract?.[group];
  const out = {} as Record<K, number>;
  for (const name of names) {
    const value = source?.[name];
    if (typeof value !== "number") throw contractBroken(`${group}.${name}`);
    out[name] = value;
  }
  return Object.freeze(out);
}

/**
 * The positions of a slot list, as {@link numbered}; the addon's list must name exactly `names`
 * too: a slot this side does not know would be read (or written) by one side only.
 */
function slots<const K extends string>(group: NumberedGroup, names: readonly K[]): Readonly<Record<K, number>> {
  const positions = numbered(group, names);
  for (const name of Object.keys(native.contract[group]))
    if (!Object.hasOwn(positions, name)) throw contractBroken(`${group} entry this side knows ("${name}")`);
  return positions;
}

/** The contract's `group` of names, each checked against what this side knows (`known`). */
function named<K extends string>(group: NamedGroup, known: Readonly<Record<K, true>>): readonly K[] {
  const list = native.contract?.[group];
  if (!list) throw contractBroken(group);
  for (const name of list)
    if (!Object.hasOwn(known, name)) throw contractBroken(`${group} entry this side knows ("${name}")`);
  return list as readonly K[];
}

/** Statuses of an eval (native/boundary.h QJSN_EVAL_STATUSES). */
export const NativeStatus = numbered("evalStatus", [
  "Ok",
  "GuestError",
  "SyntaxError",
  "Timeout",
  "OutOfMemory",
  "StackOverflow",
  "Aborted",
  "Disposed",
  "Unserializable",
  "Broken",
  "Busy",
  "CopyLimit",
  "HostCallLimit",
  "WorkerLost",
]);
export type NativeStatus = number;

/** Why guest code was stopped (QJSN_STOP_REASONS). */
export const NativeStop = numbered("stopReason", [
  "None",
  "ExecutionBudget",
  "WallBudget",
  "Abort",
  "Dispose",
  "CopyLimit",
  "HostCallLimit",
]);

/** How a native snapshot read or write ended (QJSN_SNAPSHOT_STATUSES). */
export const NativeSnapshotStatus = numbered("snapshotStatus", [
  "Ok",
  "TooLarge",
  "Invalid",
  "OutOfMemory",
  "Interrupted",
  "StackExhausted",
]);

/** Positions of an inline eval's numbers in `syncStats` (QJSN_STATS_SLOTS). */
export const StatsSlot = slots("statsSlot", [
  "status",
  "stop",
  "consoleTruncated",
  "executionMs",
  "hostCalls",
  "memoryUsedBytes",
  "peakMemoryBytes",
  "valueLength",
]);

/** What a job does (QJSN_JOB_KINDS). */
export const JobKind = numbered("jobKind", ["Eval", "EvalThenSnapshot", "WriteSnapshot", "ReadSnapshot"]);

/** Positions of a job's numbers in `request` (QJSN_REQUEST_SLOTS). */
export const RequestSlot = slots("requestSlot", [
  "kind",
  "sandboxId",
  "evalId",
  "budgetMs",
  "describe",
  "streamConsole",
  "runInline",
  "answerNow",
  "resultParts",
  "thrownParts",
  "displayDepth",
  "snapshotMaxBytes",
]);

/** Positions of a new sandbox's options in `createSlots` (QJSN_CREATE_SLOTS). */
export const CreateSlot = slots("createSlot", [
  "memoryLimitBytes",
  "maxStackSizeBytes",
  "captureConsole",
  "maxConsoleBytes",
  "copyLimitBytes",
  "maxHostCallsInFlight",
]);

/** Positions of the numbers of a handle call other than a job's in `callSlots` (QJSN_CALL_SLOTS). */
export const CallSlot = slots("callSlot", [
  "evalId",
  "reason",
  "callId",
  "ok",
  "collect",
  "resultBytes",
  "fnId",
  "async",
  "limit",
  "clockFixed",
  "epochMs",
  "localTimeUtc",
  "seed",
]);

/** Positions of a primitive host call's numbers in `primitiveSlots` (QJSN_PRIMITIVE_SLOTS). */
export const PrimitiveSlot = slots("primitiveSlot", ["call", "arg0", "arg1", "arg2", "result", "hasResult"]);

/** What a {@link NativeDispatcher} call carries (QJSN_DISPATCH_KINDS). */
export const DispatchKind = numbered("dispatchKind", ["SyncCall", "AsyncCall", "Console"]);

/** Frames of the channel to a helper process (QJSN_CHANNEL_FRAMES; layouts: native/boundary.h). */
export const ChannelFrame = numbered("channelFrame", [
  "Create",
  "Dispose",
  "DefineFunction",
  "SetGlobal",
  "GetGlobal",
  "MemoryUsage",
  "SetClock",
  "SetRandomSeed",
  "EvalSync",
  "Start",
  "Stop",
  "Settle",
  "AnswerSync",
  "GlobalNames",
  "DefineFrozen",
  "TestHook",
  "Reply",
  "SyncCall",
  "AsyncCall",
  "Console",
  "EvalDone",
  "AppendResult",
]);

/** Fixed sizes of the channel to a helper process (QJSN_CHANNEL_SIZES). */
export const CHANNEL_SIZES = numbered("channelSizes", ["headerBytes", "maxFrameBytes", "directFlag"]);

/** Wire tags the host encodes and decodes (QJSN_WIRE_TAGS; the format: native/wire.h). */
export const WireTag = numbered("wireTag", [
  "Undefined",
  "Null",
  "False",
  "True",
  "Int32",
  "Float64",
  "String",
  "Array",
  "Object",
  "Date",
  "RegExp",
  "Map",
  "Set",
  "ArrayBuffer",
  "TypedArray",
  "Error",
  "BackRef",
  "Opaque",
  "Latin1",
  "BigIntHex",
  "More",
]);

/** Typed array kinds in the wire format (QJSN_TYPED_KINDS). */
export const TypedKind = numbered("typedKind", [
  "Int8",
  "Uint8",
  "Uint8Clamped",
  "Int16",
  "Uint16",
  "Int32",
  "Uint32",
  "Float32",
  "Float64",
  "BigInt64",
  "BigUint64",
  "Float16",
  "DataView",
]);

/** Caps on one copied value, the same record the native decoder and snapshot reader use (QJSN_COPY_LIMITS). */
export const COPY_LIMITS = numbered("copyLimits", ["maxDepth", "maxNodes", "maxBytes"]);

/** Fixed sizes of the boundary (QJSN_BOUNDARY_SIZES). */
export const BOUNDARY_SIZES = numbered("sizes", [
  "exchangeBytes",
  "maxPrimitiveArgs",
  "maxPrimitiveChars",
  "hostCallStateBytes",
]);
// NativePrimitiveDispatcher takes exactly this many primitive arguments.
if (BOUNDARY_SIZES.maxPrimitiveArgs !== 3) throw contractBroken("maxPrimitiveArgs of 3");

/** Console levels by the number a console line carries (QJSN_CONSOLE_LEVELS). */
export const CONSOLE_LEVELS = named<ConsoleLevel>("consoleLevels", {
  log: true,
  info: true,
  warn: true,
  error: true,
  debug: true,
});

/** What a described guest value was, by the number the wire format gives it (QJSN_OPAQUE_KINDS). */
export const OPAQUE_KINDS = named<GuestOpaqueKind>("opaqueKinds", {
  function: true,
  symbol: true,
  accessor: true,
  proxy: true,
  promise: true,
  "weak collection": true,
  object: true,
});

// Every code a direct call's NativeError can carry (QJSN_ERROR_CODES) is a SandboxErrorCode.
named<SandboxErrorCode>("errorCodes", {
  SYNTAX_ERROR: true,
  GUEST_ERROR: true,
  TIMEOUT: true,
  OUT_OF_MEMORY: true,
  STACK_OVERFLOW: true,
  ABORTED: true,
  DISPOSED: true,
  BUSY: true,
  BROKEN: true,
  UNSERIALIZABLE: true,
  COPY_LIMIT: true,
  HOST_CALL_LIMIT: true,
  INVALID_ARGUMENT: true,
  INVALID_SNAPSHOT: true,
  WORKER_LOST: true,
});

/** Positions in the array a job resolves with (QJSN_OUTCOME_SLOTS): read by {@link outcomeOf}, written by the process tier. */
export const OutcomeSlot = slots("outcomeSlot", [
  "status",
  "value",
  "message",
  "stop",
  "console",
  "consoleTruncated",
  "executionMs",
  "hostCalls",
  "memoryUsedBytes",
  "peakMemoryBytes",
  "kind",
  "snapshot",
]);

/** Positions in a snapshot read's or write's array (QJSN_SNAPSHOT_RESULT_SLOTS): read by {@link snapshotResultOf} only. */
const SnapshotResultSlot = slots("snapshotResultSlot", ["status", "result", "notRestored"]);

/** Positions of what an eval answered on the spot hands back besides its stats (QJSN_ANSWERED_SLOTS). */
export const AnsweredSlot = slots("answeredSlot", ["value", "message", "console"]);

/** A native snapshot read's or write's result, by slot name (a read's has no body). */
export function snapshotResultOf(raw: NativeSnapshotSlots): NativeSnapshotWrite {
  const result = raw[SnapshotResultSlot.result];
  const out: NativeSnapshotWrite = {
    status: raw[SnapshotResultSlot.status] as number,
    notRestored: raw[SnapshotResultSlot.notRestored] as string[],
  };
  if (typeof result === "string") out.message = result;
  else if (result !== undefined) out.body = result as Buffer;
  return out;
}

/** A job's outcome, by slot name: a snapshot job's result as `written` or `read`, by the job's kind. */
export function outcomeOf(raw: NativeOutcomeSlots): NativeOutcome {
  const outcome: NativeOutcome = {
    status: raw[OutcomeSlot.status] as number,
    value: raw[OutcomeSlot.value] as Buffer | undefined,
    message: raw[OutcomeSlot.message] as string,
    stop: raw[OutcomeSlot.stop] as number,
    console: raw[OutcomeSlot.console] as Buffer | undefined,
    consoleTruncated: raw[OutcomeSlot.consoleTruncated] as boolean,
    executionMs: raw[OutcomeSlot.executionMs] as number,
    hostCalls: raw[OutcomeSlot.hostCalls] as number,
    memoryUsedBytes: raw[OutcomeSlot.memoryUsedBytes] as number,
    peakMemoryBytes: raw[OutcomeSlot.peakMemoryBytes] as number,
  };
  const snapshot = raw[OutcomeSlot.snapshot] as NativeSnapshotSlots | undefined;
  if (snapshot !== undefined) {
    const result = snapshotResultOf(snapshot);
    if (raw[OutcomeSlot.kind] === JobKind.ReadSnapshot) outcome.read = result;
    else outcome.written = result;
  }
  return outcome;
}
