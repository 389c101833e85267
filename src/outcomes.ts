/**
 * Outcomes: what the addon reports for an eval (a status, the value or thrown value as wire bytes,
 * the console, the numbers) turned into an {@link EvalReport}, with native statuses translated
 * into typed {@link SandboxError}s that name the budget or limit involved.
 */
import { SandboxError, type GuestErrorInfo } from "./errors.js";
import { DECODE_SLICE_WORK, type DecodeQueue } from "./decode-queue.js";
import {
  ConsoleDecoder,
  GuestOpaque,
  ValueDecoder,
  decodeConsole,
  decodeValue,
  errorHead,
  NOT_SCALAR,
  smallValueOf,
  type ConsoleRecord,
} from "./marshal.js";
import {
  AnsweredSlot,
  CONSOLE_LEVELS,
  isNativeError,
  native,
  NativeStatus,
  NativeStop,
  StatsSlot,
  type AnsweredHere,
  type NativeError,
  type NativeOutcome,
  type NativeOutcomeSlots,
  outcomeOf,
} from "./native.js";
import { formatConsoleArgs, renderValue } from "./render.js";
import { MAX_THROWN_CHARS } from "./request.js";
import { recordResultPieces } from "./result-pieces.js";
import { wallTimer } from "./wall-hold.js";
import type { ConsoleEntry, EvalOptions, EvalReport, EvalStats, ResolvedSandboxOptions } from "./types.js";

/** Console levels by the number the engine sends. */
export { CONSOLE_LEVELS };

/** The budgets and limits an eval ran under, for error messages that name them. */
export interface OutcomeLimits {
  executionTimeoutMs: number;
  wallTimeoutMs: number;
  memoryLimitBytes: number;
  copyLimitBytes: number;
  maxConsoleBytes: number;
  maxHostCallsInFlight: number;
}

function guestInfo(thrown: unknown): GuestErrorInfo {
  if (thrown instanceof Error) {
    const info: GuestErrorInfo = { name: thrown.name, message: thrown.message };
    // The decoder's stack starts `Name: message`, as Node's do; the info keeps the frames apart.
    const head = errorHead(thrown.name, thrown.message);
    const stack = typeof thrown.stack === "string" ? thrown.stack : "";
    const frames = stack.startsWith(head) ? stack.slice(head.length).replace(/^\n/, "") : stack;
    if (frames !== "") info.stack = frames;
    return info;
  }
  const text = typeof thrown === "string" ? thrown : renderValue(thrown, MAX_THROWN_CHARS);
  return {
    name: thrown === null ? "null" : thrown instanceof GuestOpaque ? thrown.kind : typeof thrown,
    message: text,
    nonError: true,
  };
}

/**
 * The typed error of a direct call the engine refused or failed, returned or thrown as a
 * {@link NativeError}: the one place such an error becomes a {@link SandboxError}. `BUSY` says it
 * could not `what` during an eval, `STACK_OVERFLOW` keeps the engine's words, any other code the
 * engine's reason after `context` (when given). A thrown error that is not a NativeError is the
 * cause of a `BROKEN` one.
 */
export function refusal(error: unknown, what: string, context?: string): SandboxError {
  if (!isNativeError(error)) return new SandboxError("BROKEN", `could not ${what}`, { cause: error });
  if (error.code === "BUSY") return new SandboxError("BUSY", `cannot ${what} while an eval runs`);
  if (error.code === "STACK_OVERFLOW") return new SandboxError("STACK_OVERFLOW", error.message);
  return new SandboxError(error.code, context === undefined ? error.message : `${context}: ${error.message}`);
}

/** Throws {@link refusal}'s error when a direct call failed. */
export function throwIfFailed(error: NativeError | undefined, what: string, context: string): void {
  if (error) throw refusal(error, what, context);
}

/** The value of a `getGlobal`, or its typed error. */
export function globalValueOf(result: Buffer | NativeError): unknown {
  if (isNativeError(result)) throw refusal(result, "read a global");
  return decodeValue(result);
}

/** The limits of an eval that sets no budget of its own, by sandbox options: made once, only ever read. */
const defaultLimits = new WeakMap<ResolvedSandboxOptions, OutcomeLimits>();

/** The budgets and limits of an eval run with `o` (and, when one was armed, a wall budget of `wallBudgetMs`). */
export function limitsOf(options: ResolvedSandboxOptions, o: EvalOptions, wallBudgetMs?: number): OutcomeLimits {
  if (
    o.timeoutMs !== undefined ||
    o.wallTimeoutMs !== undefined ||
    (wallBudgetMs ?? options.wallTimeoutMs) !== options.wallTimeoutMs
  )
    return newLimits(options, o, wallBudgetMs);
  let limits = defaultLimits.get(options);
  if (limits === undefined) {
    limits = newLimits(options, o, wallBudgetMs);
    defaultLimits.set(options, limits);
  }
  return limits;
}

function newLimits(options: ResolvedSandboxOptions, o: EvalOptions, wallBudgetMs?: number): OutcomeLimits {
  return {
    executionTimeoutMs: o.timeoutMs ?? options.executionTimeoutMs,
    wallTimeoutMs: wallBudgetMs ?? o.wallTimeoutMs ?? options.wallTimeoutMs,
    memoryLimitBytes: options.memoryLimitBytes,
    copyLimitBytes: options.copyLimitBytes,
    maxConsoleBytes: options.maxConsoleBytes,
    maxHostCallsInFlight: options.maxHostCallsInFlight,
  };
}

/** Views of the exchange buffer's first bytes, by length, for short values: making a view costs more than decoding a number. */
const exchangeViews: Buffer[] = [];
const VIEWED_BYTES = 64;

/** The first `length` bytes of the exchange buffer (a view, valid until the next call into the addon). */
function exchangeView(length: number): Buffer {
  if (length > VIEWED_BYTES) return native.exchange.subarray(0, length);
  let view = exchangeViews[length];
  if (view === undefined) {
    view = native.exchange.subarray(0, length);
    exchangeViews[length] = view;
  }
  return view;
}

/**
 * The outcome of an eval answered on the spot: its numbers from `native.syncStats`, its value from
 * the exchange buffer when it fitted there (a view, valid until the next call into the addon), the
 * rest from what `evalSync` or `start` returned.
 */
export function syncOutcome(extras: AnsweredHere): NativeOutcome {
  const s = native.syncStats;
  const inExchange = s[StatsSlot.valueLength]!;
  return {
    status: s[StatsSlot.status]!,
    value: inExchange >= 0 ? exchangeView(inExchange) : (extras?.[AnsweredSlot.value] as Buffer | undefined),
    message: (extras?.[AnsweredSlot.message] as string | undefined) ?? "",
    stop: s[StatsSlot.stop]!,
    console: extras?.[AnsweredSlot.console] as Buffer | undefined,
    consoleTruncated: s[StatsSlot.consoleTruncated] === 1,
    executionMs: s[StatsSlot.executionMs]!,
    hostCalls: s[StatsSlot.hostCalls]!,
    memoryUsedBytes: s[StatsSlot.memoryUsedBytes]!,
    peakMemoryBytes: s[StatsSlot.peakMemoryBytes]!,
  };
}

/** The outcome of an eval that never reached the engine (disposed, broken, aborted first, busy). */
export function stubOutcome(status: NativeStatus): NativeOutcome {
  return {
    status,
    value: undefined,
    message: "",
    stop: NativeStop.None,
    console: undefined,
    consoleTruncated: false,
    executionMs: 0,
    hostCalls: 0,
    memoryUsedBytes: 0,
    peakMemoryBytes: 0,
  };
}

/** An outcome's bytes, decoded: the value or thrown value (or why it could not be copied out) and the console records. */
export interface DecodedOutcome {
  value: unknown;
  /** The flat pieces of a string value decoded in chunks ({@link ValueDecoder.pieces}). */
  pieces?: readonly string[] | undefined;
  failure?: SandboxError;
  console: readonly ConsoleRecord[];
}

/** The console records of an eval that wrote none: one shared array, only ever read. */
const NO_RECORDS: readonly ConsoleRecord[] = [];

/** Whether an outcome's value bytes are a result or a thrown value (the only ones decoded). */
function carriesValue(status: NativeStatus): boolean {
  return status === NativeStatus.Ok || status === NativeStatus.GuestError || status === NativeStatus.SyntaxError;
}

/** An outcome's bytes decoded at once (inline evals: the caller chose to block). */
export function decodeAtOnce(raw: NativeOutcome): DecodedOutcome {
  const { status, value: valueBytes, console: consoleBytes } = raw;
  const console = consoleBytes ? decodeConsole(consoleBytes) : [];
  if (!valueBytes || !carriesValue(status)) return { value: undefined, console };
  try {
    return { value: decodeValue(valueBytes), console };
  } catch (err) {
    return { value: undefined, failure: err as SandboxError, console };
  }
}

/**
 * An outcome's bytes decoded through `queue`, after everything the guest sent before. The common
 * case (no console output, nothing queued, a value within one slice) is decoded before returning,
 * without a promise. The promise rejects with `DISPOSED` when the queue is cancelled meanwhile.
 */
export function decodeOutcome(raw: NativeOutcome, queue: DecodeQueue): DecodedOutcome | Promise<DecodedOutcome> {
  const { status, value: valueBytes, console: consoleBytes } = raw;
  const carried = valueBytes && carriesValue(status) ? valueBytes : undefined;
  const atOnce = !consoleBytes && !queue.busy;
  if (atOnce) {
    if (!carried) return { value: undefined, console: NO_RECORDS };
    const small = smallValueOf(carried);
    if (small !== NOT_SCALAR) return { value: small, console: NO_RECORDS };
  }
  const value = carried ? new ValueDecoder(carried) : undefined;
  if (atOnce) {
    try {
      if (value!.advance(DECODE_SLICE_WORK)) return { value: value!.value, pieces: value!.pieces, console: NO_RECORDS };
    } catch (err) {
      return { value: undefined, failure: err as SandboxError, console: NO_RECORDS };
    }
  }
  // Decoded later: the exchange buffer (where a value answered at once may still be) is reused by then.
  if (carried?.buffer === native.exchange.buffer) value!.detach();
  return decodeInSlices(queue, consoleBytes, value);
}

// The rest of decodeOutcome, a slice at a time (`value` goes on where it stopped).
async function decodeInSlices(
  queue: DecodeQueue,
  consoleBytes: Buffer | undefined,
  value: ValueDecoder | undefined,
): Promise<DecodedOutcome> {
  const console = consoleBytes ? await queue.decode(new ConsoleDecoder(consoleBytes)) : [];
  if (!value) return { value: undefined, console };
  try {
    return { value: await queue.decode(value), pieces: value.pieces, console };
  } catch (err) {
    if ((err as SandboxError).code === "DISPOSED") throw err;
    return { value: undefined, failure: err as SandboxError, console };
  }
}

/**
 * The report of one eval: value or typed error, console lines within `maxConsoleBytes`, stats.
 * Without `decoded`, the outcome's bytes are decoded at once.
 */
export function reportOf(
  raw: NativeOutcome,
  wallMs: number,
  limits: OutcomeLimits,
  decoded: DecodedOutcome = decodeAtOnce(raw),
): EvalReport {
  const {
    status,
    message,
    stop,
    consoleTruncated: rawTruncated,
    executionMs,
    hostCalls,
    memoryUsedBytes,
    peakMemoryBytes,
  } = raw;
  const stats: EvalStats = { executionMs, wallMs, hostCalls, memoryUsedBytes, peakMemoryBytes };
  const console: ConsoleEntry[] = [];
  const consoleTruncated = formatConsole(decoded.console, limits.maxConsoleBytes, console) || rawTruncated;
  if (status === NativeStatus.Ok) {
    if (decoded.failure) return { ok: false, error: decoded.failure, console, consoleTruncated, stats };
    const report: EvalReport = { ok: true, value: decoded.value, console, consoleTruncated, stats };
    if (decoded.pieces !== undefined) recordResultPieces(report, decoded.pieces);
    return report;
  }
  const error = errorOf(status, decoded, message, stop, limits);
  return { ok: false, error, console, consoleTruncated, stats };
}

/** The typed error of a native status that is not `Ok`. */
export function errorOf(
  status: NativeStatus,
  decoded: DecodedOutcome | undefined,
  message: string,
  stop: number,
  limits: OutcomeLimits,
): SandboxError {
  switch (status) {
    case NativeStatus.GuestError:
    case NativeStatus.SyntaxError: {
      const thrown = decoded?.failure ? new Error("the thrown value could not be copied out") : decoded?.value;
      const guest = guestInfo(thrown);
      const text = guest.nonError ? guest.message : `${guest.name}: ${guest.message}`;
      return new SandboxError(status === NativeStatus.SyntaxError ? "SYNTAX_ERROR" : "GUEST_ERROR", text, { guest });
    }
    case NativeStatus.Timeout: {
      const budget = stop === NativeStop.WallBudget ? "wall" : "execution";
      const ms = budget === "wall" ? limits.wallTimeoutMs : limits.executionTimeoutMs;
      const watchdog = message ? `; ${message}` : "";
      return new SandboxError(
        "TIMEOUT",
        `the ${budget === "wall" ? "wall-clock" : "execution"} budget of ${ms} ms ran out${watchdog}`,
        { budget },
      );
    }
    case NativeStatus.OutOfMemory:
      return new SandboxError("OUT_OF_MEMORY", `the guest ran out of memory (limit ${limits.memoryLimitBytes} bytes)`);
    case NativeStatus.StackOverflow:
      // With a message, the engine refused to start: the calling thread had too little stack left.
      if (message) return new SandboxError("STACK_OVERFLOW", message);
      return new SandboxError("STACK_OVERFLOW", "RangeError: Maximum call stack size exceeded", {
        guest: { name: "RangeError", message: "Maximum call stack size exceeded" },
      });
    case NativeStatus.Aborted:
      return new SandboxError("ABORTED", "the eval was aborted");
    case NativeStatus.Disposed:
      return new SandboxError("DISPOSED", "the sandbox was disposed");
    case NativeStatus.Unserializable:
      return new SandboxError("UNSERIALIZABLE", message || "the result cannot be copied out of the sandbox");
    case NativeStatus.WorkerLost:
      return new SandboxError("WORKER_LOST", message || "the sandbox's helper process died");
    case NativeStatus.Broken:
      return new SandboxError(
        "BROKEN",
        "the sandbox was stopped while stuck in a built-in that cannot be interrupted; dispose it and create a new one",
      );
    case NativeStatus.CopyLimit:
      return new SandboxError(
        "COPY_LIMIT",
        `${message || "the eval's output"} would take the host past this eval's copy limit of ${limits.copyLimitBytes} bytes (copyLimitBytes; the result, console, thrown value and host-call arguments all count, and so does the state the host holds for each host call in flight)`,
      );
    case NativeStatus.HostCallLimit:
      return new SandboxError(
        "HOST_CALL_LIMIT",
        `the eval had more than ${limits.maxHostCallsInFlight} host calls in flight at once (maxHostCallsInFlight; await some before making more)`,
      );
    case NativeStatus.Busy:
      return new SandboxError("BUSY", "the sandbox is busy: a host function cannot run code in its own sandbox");
    default:
      return new SandboxError("GUEST_ERROR", `unexpected engine status ${status}`);
  }
}

// The cap is exact here, in UTF-8 bytes of the formatted text; the engine keeps a looser bound on
// the raw arguments so a console flood cannot exhaust memory before we get to count.
// Fills `entries`; true when the cap cut the records short.
function formatConsole(records: readonly ConsoleRecord[], maxBytes: number, entries: ConsoleEntry[]): boolean {
  let used = 0;
  // Indexed: an iterator would be an allocation per eval, even over no records.
  for (let i = 0; i < records.length; i++) {
    const { level, args } = records[i]!;
    // Rendered within what is left of the cap: shared sub-trees and huge objects cost no more.
    const text = formatConsoleArgs(args, maxBytes - used + 1);
    used += Buffer.byteLength(text);
    if (used > maxBytes) return true;
    entries.push({ level: CONSOLE_LEVELS[level] ?? "log", text });
  }
  return false;
}

/** Copies the value of an outcome answered at once out of the exchange buffer, when it is there. */
export function copyOutOfExchange(raw: NativeOutcome): void {
  if (raw.value?.buffer === native.exchange.buffer) raw.value = Buffer.from(raw.value);
}

/** The value of an eval's report, or its error thrown. */
export function valueOfReport(report: EvalReport): unknown {
  if (!report.ok) throw report.error;
  return report.value;
}

/** A promise of the value of the report `started` (or of the one it promises), rejected with its error. */
export function promisedValue(started: EvalReport | Promise<EvalReport>): Promise<unknown> {
  if (started instanceof Promise) return started.then(valueOfReport);
  return started.ok ? Promise.resolve(started.value) : Promise.reject(started.error);
}

/**
 * The outcome of an executor job, awaited under the wall budget `wallMs` (suspended while
 * `o.wallHold` is held) and `o.signal`: `stop` is called with NativeStop.WallBudget or Abort.
 */
export async function settledWithin(
  pending: Promise<NativeOutcomeSlots>,
  wallMs: number,
  o: EvalOptions,
  stop: (reason: number) => void,
): Promise<NativeOutcome> {
  const signal = o.signal;
  const cancel = wallTimer(wallMs, () => stop(NativeStop.WallBudget), o.wallHold);
  const onAbort = (): void => stop(NativeStop.Abort);
  signal?.addEventListener("abort", onAbort, { once: true });
  try {
    return outcomeOf(await pending);
  } finally {
    cancel();
    signal?.removeEventListener("abort", onAbort);
  }
}
