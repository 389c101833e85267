/**
 * The one place that loads the compiled addon. node-gyp-build finds a prebuilt binary in
 * prebuilds/ or a local build in build/Release, so the package works even when its install
 * script never ran. The surface is internal: only the engine files of src/ (sandbox, host calls,
 * outcomes, snapshots, validation) talk to it.
 */
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

/** Raw outcome of one eval, as native/addon.cc builds it. */
export type NativeOutcome = [
  status: number,
  value: Buffer | undefined,
  message: string,
  stopReason: number,
  console: Buffer | undefined,
  consoleTruncated: boolean,
  executionMs: number,
  hostCalls: number,
  memoryUsedBytes: number,
  peakMemoryBytes: number,
  snapshot?: NativeSnapshotRead,
];

/** Result of a native snapshot write: [status, body | message, flat [name, type, ...] of placeholders]. */
export type NativeSnapshotWrite = [status: number, result: Buffer | string | undefined, notRestored: string[]];

/** Result of a native snapshot read: [status, undefined | message, flat [name, type, ...] of placeholders]. */
export type NativeSnapshotRead = [status: number, message: string | undefined, notRestored: string[]];

/**
 * Called by the addon on the main thread for each guest call of a host function. The arguments
 * are in the handle's exchange buffer (`argLength` bytes) unless they did not fit, in which case
 * `args` holds them. A sync call answers with the result's byte count in the exchange buffer, a
 * Buffer, or `[name, message]` for an error; a sync call whose guest waits on an executor thread
 * comes with a `callId` and may answer `undefined` instead, then later through
 * {@link NativeHandle.answerSync} (the guest waits meanwhile). Kind 2 is a console line of the
 * running eval (`fnId` is its level), sent only for evals started with `streamConsole`.
 */
export type NativeDispatcher = (kind: 0 | 1 | 2, fnId: number, callId: number, argLength: number, args: Buffer | undefined, evalId: number) => number | Buffer | [string, string] | undefined;

/**
 * The fast path of a synchronous host call from an inline eval whose arguments are all primitives
 * (at most 3; strings of at most 256 UTF-16 units): they arrive as they are, after `call`, which is
 * `fnId * 4 + argc` (one number to create per call instead of two). Answers a primitive as it is,
 * `[bytes]` for any other result (the codec's answer, as {@link NativeDispatcher}'s), or
 * `[name, message]` for an error.
 */
export type NativePrimitiveDispatcher = (call: number, a0: unknown, a1: unknown, a2: unknown) => unknown;

export interface NativeHandle {
  /**
   * Runs inline. The numbers of the outcome are left in `syncStats` ([status, stop, console
   * truncated, execution ms, host calls, memory used, peak memory, value length in the exchange
   * buffer or -1]); what does not fit there comes back as [value, message, console].
   */
  evalSync(code: string, filename: string, budgetMs: number, describe: boolean): [value: Buffer | undefined, message: string, console: Buffer | undefined] | undefined;
  /** Runs on an executor thread, or with `inline` on the calling thread (slices and host-call dispatch in turn). */
  evalAsync(code: string, filename: string, budgetMs: number, describe: boolean, evalId: number, streamConsole: boolean, inline: boolean): Promise<NativeOutcome> | null;
  stop(reason: number, evalId: number): void;
  settle(callId: number, ok: boolean, result: number | Buffer | [string, string]): void;
  /** Answers the sync host call the dispatcher left unanswered, as the dispatcher would have. */
  answerSync(callId: number, result: number | Buffer | [string, string]): void;
  defineFunction(path: string, fnId: number, async: boolean): string;
  /** true: installed; false: the guest keeps its own global `name`; a string: why nothing was installed. */
  defineFrozenFunction(name: string, fnId: number): boolean | string;
  setGlobal(name: string, bytes: Buffer): string;
  getGlobal(name: string): [status: number, result: Buffer | string | undefined];
  /** Up to `limit` own string-keyed property names of the global object, or "BUSY". */
  globalNames(limit: number): string[] | "BUSY";
  memoryUsage(): [used: number, peak: number, limit: number];
  dispose(): void;
  /** [status, body | message, flat [name, type, ...] of placeholders], or "BUSY". */
  writeSnapshot(excludedNames: string[], maxBodyBytes: number): NativeSnapshotWrite | "BUSY";
  /** [status, undefined | message, flat [name, type, ...] of placeholders], or "BUSY". */
  readSnapshot(body: Uint8Array, budgetMs: number): NativeSnapshotRead | "BUSY";
  /**
   * Reads a snapshot body on an executor thread, like an eval (same budgets, stop and watchdog);
   * the outcome carries the read's result at index 10 when the read ran. Null when busy.
   */
  restoreAsync(body: Uint8Array, budgetMs: number, evalId: number): Promise<NativeOutcome> | null;
  /** Writes a snapshot body on an executor thread: the body is the outcome's value, the write's result at index 10. Null when busy. */
  writeSnapshotAsync(excludedNames: string[], maxBodyBytes: number, evalId: number): Promise<NativeOutcome> | null;
  setClock(fixed: boolean, epochMs: number, localTimeUtc: boolean): boolean;
  setRandomSeed(seed: number): boolean;
}

interface NativeModule {
  SandboxHandle: new (
    memoryLimitBytes: number,
    maxStackSizeBytes: number,
    captureConsole: boolean,
    maxConsoleBytes: number,
    dispatcher: NativeDispatcher,
    primitiveDispatcher: NativePrimitiveDispatcher,
    copyLimitBytes: number,
  ) => NativeHandle;
  threadStackBytes: number;
  /** [executor threads now, their cap]: one thread per runnable async eval, created on demand. */
  executorThreads(): [threads: number, maxThreads: number];
  /** The buffer shared with the addon for host call arguments and results. */
  exchange: Buffer;
  /** The numbers of the last inline eval (see {@link NativeHandle.evalSync}). */
  syncStats: Float64Array;
  /** QuickJS-ng version compiled in. */
  engineVersion: string;
}

/** Status codes of native/engine.h EvalStatus. */
export const enum NativeStatus {
  Ok = 0,
  GuestError = 1,
  SyntaxError = 2,
  Timeout = 3,
  OutOfMemory = 4,
  StackOverflow = 5,
  Aborted = 6,
  Disposed = 7,
  Unserializable = 8,
  Broken = 9,
  Busy = 10,
  CopyLimit = 11,
}

/** Stop reasons of native/engine.h StopReason. */
export const enum NativeStop {
  None = 0,
  ExecutionBudget = 1,
  WallBudget = 2,
  Abort = 3,
  Dispose = 4,
  CopyLimit = 5,
}

const require = createRequire(import.meta.url);
const packageRoot = join(dirname(fileURLToPath(import.meta.url)), "..");

function load(): NativeModule {
  const override = process.env.QUICKJS_NATIVE_BINARY;
  if (override) return require(override) as NativeModule;
  const nodeGypBuild = require("node-gyp-build") as (dir: string) => NativeModule;
  return nodeGypBuild(packageRoot);
}

/** The loaded addon. */
export const native: NativeModule = load();
