import { AsyncLocalStorage } from "node:async_hooks";
import { randomInt } from "node:crypto";
import { formatWithOptions } from "node:util";
import { SandboxError, type GuestErrorInfo } from "./errors.js";
import { GuestOpaque, decodeConsole, decodeValue, encodeValue, encodeValueInto } from "./marshal.js";
import { native, NativeStatus, NativeStop, type NativeHandle, type NativeOutcome } from "./native.js";
import { formatConsoleArgs, renderValue } from "./render.js";
import { maxSnapshotBody, openSnapshot, resolveSnapshotOptions, restoreBody, restoredList, sealSnapshotAsync, splitRestoreOptions, takeSnapshot, type NotRestored, type RestoreOptions, type RestoredSandbox, type SnapshotOptions } from "./snapshot.js";
import type {
  AsyncHostFunction,
  ConsoleEntry,
  ConsoleLevel,
  EvalOptions,
  EvalReport,
  EvalStats,
  HostFunction,
  MemoryUsage,
  SandboxClock,
  SandboxOptions,
} from "./types.js";

const MiB = 1024 * 1024;
const DEFAULTS: Required<Omit<SandboxOptions, "randomSeed" | "copyLimitBytes">> = {
  memoryLimitBytes: 64 * MiB,
  maxStackSizeBytes: 1 * MiB,
  executionTimeoutMs: 5000,
  wallTimeoutMs: 60_000,
  captureConsole: true,
  maxConsoleBytes: 1 * MiB,
  clock: "frozen",
};
const OPTION_KEYS = [...Object.keys(DEFAULTS), "randomSeed", "copyLimitBytes"];
// Date.now() values must stay inside the Date range (±8.64e15 ms).
const MAX_TIME_MS = 8.64e15;
const MAX_TIMEOUT_MS = 2 ** 31 - 1;
const CONSOLE_LEVELS: readonly ConsoleLevel[] = ["log", "info", "warn", "error", "debug"];
const PATH_SEGMENT = /^[A-Za-z_$][\w$]*$/;
const FORBIDDEN_SEGMENTS = new Set(["__proto__", "prototype", "constructor"]);

function invalid(message: string): SandboxError {
  return new SandboxError("INVALID_ARGUMENT", message);
}

function checkInteger(name: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw invalid(`${name} must be an integer between ${min} and ${max}; got ${formatWithOptions({ depth: 0 }, "%O", value)}`);
  }
  return value;
}

function checkTimeout(name: string, value: unknown): number {
  if (typeof value !== "number" || !(value > 0) || value > MAX_TIMEOUT_MS) {
    throw invalid(`${name} must be a number of milliseconds between 0 (exclusive) and ${MAX_TIMEOUT_MS}; got ${formatWithOptions({ depth: 0 }, "%O", value)}`);
  }
  return value;
}

function checkKeys(what: string, value: object, allowed: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) throw invalid(`unknown ${what} option '${key}'; known options: ${allowed.join(", ")}`);
  }
}

function validateOptions(options: unknown): Required<SandboxOptions> {
  if (options === undefined) return validateOptions({});
  if (typeof options !== "object" || options === null) throw invalid("Sandbox options must be an object");
  checkKeys("Sandbox", options, OPTION_KEYS);
  const o = { ...DEFAULTS, randomSeed: 0, copyLimitBytes: 0, ...(options as SandboxOptions) };
  checkInteger("memoryLimitBytes", o.memoryLimitBytes, 1 * MiB, 16 * 1024 * MiB);
  if ((options as SandboxOptions).copyLimitBytes === undefined) o.copyLimitBytes = o.memoryLimitBytes;
  else checkInteger("copyLimitBytes", o.copyLimitBytes, 1024, 16 * 1024 * MiB);
  // Executor threads have native.threadStackBytes of stack; keep a wide margin for C frames.
  checkInteger("maxStackSizeBytes", o.maxStackSizeBytes, 64 * 1024, Math.min(8 * MiB, native.threadStackBytes / 2));
  checkTimeout("executionTimeoutMs", o.executionTimeoutMs);
  checkTimeout("wallTimeoutMs", o.wallTimeoutMs);
  if (typeof o.captureConsole !== "boolean") throw invalid("captureConsole must be a boolean");
  checkInteger("maxConsoleBytes", o.maxConsoleBytes, 0, 256 * MiB);
  checkClock(o.clock);
  // A fresh seed comes from the CSPRNG: upstream seeds from the time, which leaks the host clock.
  if ((options as SandboxOptions).randomSeed === undefined) o.randomSeed = randomInt(2 ** 48 - 1);
  else checkInteger("randomSeed", o.randomSeed, 0, Number.MAX_SAFE_INTEGER);
  return o;
}

function checkClock(clock: unknown): asserts clock is SandboxClock {
  if (clock === "real" || clock === "frozen") return;
  if (typeof clock === "object" && clock !== null && typeof (clock as { now?: unknown }).now === "function") return;
  throw invalid(`clock must be "real", "frozen" or an object with a now() method; got ${formatWithOptions({ depth: 0 }, "%O", clock)}`);
}

/** The guest's Date.now() for the eval about to start: undefined for the real clock. */
function evalClockMs(clock: SandboxClock): number | undefined {
  if (clock === "real") return undefined;
  if (clock === "frozen") return Date.now();
  let ms: unknown;
  try {
    ms = clock.now();
  } catch (err) {
    throw new SandboxError("INVALID_ARGUMENT", "the sandbox's clock.now() threw", { cause: err });
  }
  if (typeof ms !== "number" || !Number.isFinite(ms) || Math.abs(ms) > MAX_TIME_MS) {
    throw invalid(`clock.now() must return a finite number of ms within ±${MAX_TIME_MS}; got ${formatWithOptions({ depth: 0 }, "%O", ms)}`);
  }
  return ms;
}

const EVAL_OPTION_KEYS = ["timeoutMs", "wallTimeoutMs", "filename", "signal", "unserializable", "onConsole", "clockMs", "randomSeed", "inline"] as const;

function validateEvalOptions(code: unknown, options: unknown): EvalOptions {
  if (typeof code !== "string") throw invalid(`code must be a string; got ${typeof code}`);
  if (options === undefined) return {};
  if (typeof options !== "object" || options === null) throw invalid("eval options must be an object");
  checkKeys("eval", options, EVAL_OPTION_KEYS);
  const o = options as EvalOptions;
  if (o.timeoutMs !== undefined) checkTimeout("timeoutMs", o.timeoutMs);
  if (o.wallTimeoutMs !== undefined) checkTimeout("wallTimeoutMs", o.wallTimeoutMs);
  if (o.filename !== undefined && (typeof o.filename !== "string" || o.filename.length > 1024)) throw invalid("filename must be a string of at most 1024 characters");
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw invalid("signal must be an AbortSignal");
  if (o.unserializable !== undefined && o.unserializable !== "throw" && o.unserializable !== "describe") throw invalid('unserializable must be "throw" or "describe"');
  if (o.onConsole !== undefined && typeof o.onConsole !== "function") throw invalid("onConsole must be a function");
  if (o.clockMs !== undefined && (typeof o.clockMs !== "number" || !Number.isFinite(o.clockMs) || Math.abs(o.clockMs) > MAX_TIME_MS)) {
    throw invalid(`clockMs must be a finite number of ms within ±${MAX_TIME_MS}; got ${formatWithOptions({ depth: 0 }, "%O", o.clockMs)}`);
  }
  if (o.randomSeed !== undefined) checkInteger("randomSeed", o.randomSeed, 0, Number.MAX_SAFE_INTEGER);
  if (o.inline !== undefined && typeof o.inline !== "boolean") throw invalid("inline must be a boolean");
  return o;
}

function validatePath(name: unknown): string {
  if (typeof name !== "string" || name.length > 256) throw invalid("name must be a string of at most 256 characters");
  const segments = name.split(".");
  for (const s of segments) {
    if (!PATH_SEGMENT.test(s) || FORBIDDEN_SEGMENTS.has(s)) throw invalid(`'${name}' is not a valid global name or dotted path of identifiers`);
  }
  return name;
}

// How the engine's refusal to run on a thread with too little stack left begins (native/engine.cc).
const STACK_REFUSAL = "the calling thread has only";

// Shared with the addon (one per Node environment): host call arguments and results of usual size
// cross without allocation. Every use is a synchronous write-then-read, so sandboxes can share it.
const exchange: Buffer = native.exchange;

/** Which sandboxes' host functions are running in the current async context (re-entry check). */
const hostCallContext = new AsyncLocalStorage<ReadonlySet<Sandbox>>();

/** A thrown non-Error value is described within this many characters (rendering runs on the main thread). */
const MAX_THROWN_CHARS = 16_384;

function guestInfo(thrown: unknown): GuestErrorInfo {
  if (thrown instanceof Error) {
    const info: GuestErrorInfo = { name: thrown.name, message: thrown.message };
    if (typeof thrown.stack === "string" && thrown.stack !== `${thrown.name}: ${thrown.message}`) info.stack = thrown.stack;
    return info;
  }
  const text = typeof thrown === "string" ? thrown : renderValue(thrown, MAX_THROWN_CHARS);
  return { name: thrown === null ? "null" : thrown instanceof GuestOpaque ? thrown.kind : typeof thrown, message: text, nonError: true };
}

/** A host result the addon copies without the codec (native/engine.h kMaxPrimitiveChars). */
function passesAsIs(v: unknown): boolean {
  const t = typeof v;
  return v === undefined || v === null || t === "number" || t === "boolean" || (t === "string" && (v as string).length <= 256);
}

function hostErrorOf(err: unknown): [string, string] {
  // Host functions can throw anything, even a Proxy whose traps throw: describing it must not
  // throw, or an async call would never settle (test/hostile/host-abuse.test.ts).
  try {
    if (err instanceof Error) return [String(err.name || "Error"), String(err.message)];
    return ["Error", typeof err === "string" ? err : formatWithOptions({ depth: 2 }, "%O", err)];
  } catch {
    return ["Error", "the host function threw a value that cannot be described"];
  }
}

interface RegisteredFunction {
  name: string;
  fn: HostFunction | AsyncHostFunction;
  async: boolean;
}

/**
 * A JavaScript sandbox: one QuickJS-ng runtime with its own memory limit, stack limit, time
 * budgets and job queue. Values cross in and out by copy; no host object ever reaches guest code.
 *
 * Evals run one after another in call order. `eval`/`run` execute on the addon's executor threads
 * and never block the Node event loop; a running eval has a thread of its own (created on demand,
 * at most 64, or `QJSN_EXECUTOR_THREADS`), time-sliced by the OS, so a spinning guest in one sandbox
 * never holds back another sandbox's eval. `evalSync`/`runSync` run inline, for short computations.
 */
export class Sandbox implements Disposable {
  readonly #options: Required<SandboxOptions>;
  #handle: NativeHandle | undefined;
  readonly #functions: RegisteredFunction[] = [];
  #queue: Promise<void> = Promise.resolve();
  #evalSeq = 0;
  #currentEvalId = 0;
  // Signals of the current eval's host calls that asked for one; tagged with that eval's id.
  readonly #pendingCalls: Map<number, AbortController> & { evalId?: number } = new Map();
  #inSyncHostCall = 0;
  #asyncEvals = 0; // queued or running eval()/run() calls
  #onConsole: ((entry: ConsoleEntry) => void) | undefined; // live console listener of the running eval
  #broken = false;

  /** Creates a sandbox. Throws `INVALID_ARGUMENT` for bad options. */
  constructor(options?: SandboxOptions) {
    this.#options = validateOptions(options);
    const o = this.#options;
    try {
      this.#handle = new native.SandboxHandle(o.memoryLimitBytes, o.maxStackSizeBytes, o.captureConsole, o.maxConsoleBytes, this.#dispatch, this.#dispatchPrimitive, o.copyLimitBytes);
    } catch (err) {
      throw new SandboxError("OUT_OF_MEMORY", "could not create the sandbox runtime", { cause: err });
    }
    this.#handle.setRandomSeed(o.randomSeed);
  }

  // Sets the guest clock (and, when asked, the Math.random seed) for the eval about to start; the
  // engine is idle here (a busy engine refuses it, and then refuses the eval too).
  #startClock(handle: NativeHandle, o: EvalOptions): void {
    const ms = o.clockMs ?? evalClockMs(this.#options.clock);
    // A clock.now() is host code: it can dispose this very sandbox.
    if (this.#handle !== handle) throw new SandboxError("DISPOSED", "the sandbox was disposed by its clock.now()");
    handle.setClock(ms !== undefined, ms ?? 0, o.clockMs !== undefined || this.#options.clock !== "real");
    if (o.randomSeed !== undefined) handle.setRandomSeed(o.randomSeed);
  }

  /** True once {@link Sandbox.dispose} ran. */
  get disposed(): boolean {
    return this.#handle === undefined;
  }

  /**
   * True once an eval was stopped by the watchdog while stuck in a built-in that cannot be
   * interrupted: every later eval fails with `BROKEN`. Dispose it and create a new sandbox.
   */
  get broken(): boolean {
    return this.#broken;
  }

  /** The options in force, defaults filled in. */
  get options(): Readonly<Required<SandboxOptions>> {
    return this.#options;
  }

  // Called by the addon for every guest call of a host function (main thread).
  readonly #dispatch = (kind: 0 | 1 | 2, fnId: number, callId: number, argLength: number, argBytes: Buffer | undefined, evalId: number): number | Buffer | [string, string] | undefined => {
    if (kind === 2) {
      this.#streamConsole(fnId, argBytes ?? exchange.subarray(0, argLength), evalId);
      return undefined;
    }
    const entry = this.#functions[fnId];
    if (!entry) return ["Error", "unknown host function"];
    let args: unknown[];
    try {
      args = decodeValue(argBytes ?? exchange.subarray(0, argLength)) as unknown[];
    } catch (err) {
      return hostErrorOf(err);
    }
    if (kind === 0) return this.#callSync(entry, args) as number | Buffer | [string, string];
    this.#callAsync(entry, args, callId, evalId);
    return undefined;
  };

  // The addon's fast path for sync host calls of inline evals with primitive arguments.
  readonly #dispatchPrimitive = (fnId: number, argc: number, a0: unknown, a1: unknown, a2: unknown): unknown => {
    const entry = this.#functions[fnId];
    if (!entry) return ["Error", "unknown host function"];
    return this.#callSync(entry, argc === 0 ? [] : argc === 1 ? [a0] : argc === 2 ? [a0, a1] : [a0, a1, a2], true);
  };

  #streamConsole(level: number, argBytes: Buffer, evalId: number): void {
    const listener = this.#onConsole;
    if (!listener || evalId !== this.#currentEvalId) return;
    try {
      const args = decodeValue(argBytes) as unknown[];
      listener({ level: CONSOLE_LEVELS[level] ?? "log", text: formatConsoleArgs(args, this.#options.maxConsoleBytes) });
    } catch {
      // a failing progress listener must not disturb the eval
    }
  }

  // With `primitiveAnswer`, a primitive result is returned as it is and any other as [bytes].
  #callSync(entry: RegisteredFunction, args: unknown[], primitiveAnswer = false): unknown {
    this.#inSyncHostCall++;
    try {
      // Re-entry from a sync host function is caught by #inSyncHostCall, so no async context is needed.
      const result = (entry.fn as HostFunction)(...args);
      if (result instanceof Promise) {
        result.catch(() => {});
        return ["TypeError", `host function '${entry.name}' returned a promise; register it with defineAsyncFunction`];
      }
      if (!primitiveAnswer) return encodeValueInto(result, exchange);
      return passesAsIs(result) ? result : [encodeValueInto(result, exchange)];
    } catch (err) {
      return hostErrorOf(err);
    } finally {
      this.#inSyncHostCall--;
    }
  }

  #callAsync(entry: RegisteredFunction, args: unknown[], callId: number, evalId: number): void {
    // Most host functions never look at their signal: create the controller only when one does.
    let controller: AbortController | undefined;
    const pendingCalls = this.#pendingCalls;
    const context = {
      get signal(): AbortSignal {
        if (!controller) {
          controller = new AbortController();
          if (evalId === pendingCalls.evalId) pendingCalls.set(callId, controller);
          else controller.abort(new SandboxError("ABORTED", "the eval that made this call has ended"));
        }
        return controller.signal;
      },
    };
    const settle = (ok: boolean, result: number | Buffer | [string, string]): void => {
      pendingCalls.delete(callId);
      if (evalId !== this.#currentEvalId || !this.#handle) return;
      this.#handle.settle(callId, ok, result);
    };
    let pending: unknown;
    try {
      pending = hostCallContext.run(this.#withSelf(), () => (entry.fn as AsyncHostFunction)(args, context));
    } catch (err) {
      settle(false, hostErrorOf(err));
      return;
    }
    const deliver = (value: unknown): void => {
      let bytes: number | Buffer;
      try {
        bytes = encodeValueInto(value, exchange);
      } catch (err) {
        settle(false, ["TypeError", `the result of '${entry.name}' cannot be copied into the sandbox: ${(err as Error).message}`]);
        return;
      }
      settle(true, bytes);
    };
    // A plain (non-thenable) result settles at once, without a trip through the microtask queue.
    if (typeof (pending as { then?: unknown } | null)?.then !== "function") deliver(pending);
    else Promise.resolve(pending).then(deliver, (err: unknown) => settle(false, hostErrorOf(err)));
  }

  #withSelf(): ReadonlySet<Sandbox> {
    const outer = hostCallContext.getStore();
    if (outer?.has(this)) return outer;
    return new Set(outer ? [...outer, this] : [this]);
  }

  #live(): NativeHandle {
    if (!this.#handle) throw new SandboxError("DISPOSED", "the sandbox is disposed");
    return this.#handle;
  }

  #reentered(): boolean {
    return this.#inSyncHostCall > 0 || hostCallContext.getStore()?.has(this) === true;
  }

  /**
   * Exposes a synchronous host function to the guest as a global (or at a dotted path such as
   * `"tools.lookup"`). Arguments and the result are copied; a thrown host error becomes a guest
   * `Error` with the message only.
   */
  defineFunction(name: string, fn: HostFunction): void {
    this.#define(name, fn, false);
  }

  /**
   * Exposes an asynchronous host function: the guest call returns a promise at once, `fn` runs on
   * the Node main thread with the copied arguments and an `AbortSignal` that fires when the eval
   * ends first, and its result (or error message) settles the guest promise.
   */
  defineAsyncFunction(name: string, fn: AsyncHostFunction): void {
    this.#define(name, fn, true);
  }

  #define(name: string, fn: HostFunction | AsyncHostFunction, async: boolean): void {
    validatePath(name);
    if (typeof fn !== "function") throw invalid("fn must be a function");
    const handle = this.#live();
    const fnId = this.#functions.length;
    const error = handle.defineFunction(name, fnId, async);
    if (error === "BUSY") throw new SandboxError("BUSY", "cannot define a function while an eval runs");
    if (error.startsWith(STACK_REFUSAL)) throw new SandboxError("STACK_OVERFLOW", error);
    if (error) throw invalid(`cannot define '${name}': ${error}`);
    this.#functions.push({ name, fn, async });
  }

  /** Copies `value` into the guest as the global `name`. */
  setGlobal(name: string, value: unknown): void {
    if (typeof name !== "string" || !PATH_SEGMENT.test(name) || FORBIDDEN_SEGMENTS.has(name)) throw invalid("name must be an identifier");
    const handle = this.#live();
    const error = handle.setGlobal(name, encodeValue(value));
    if (error === "BUSY") throw new SandboxError("BUSY", "cannot set a global while an eval runs");
    if (error.startsWith(STACK_REFUSAL)) throw new SandboxError("STACK_OVERFLOW", error);
    if (error) throw new SandboxError("OUT_OF_MEMORY", `cannot set global '${name}': ${error}`);
  }

  /** Copies the guest global `name` out (its own data property; getters are never run). */
  getGlobal(name: string): unknown {
    if (typeof name !== "string" || name.length > 1024) throw invalid("name must be a string");
    const [status, result] = this.#live().getGlobal(name);
    if (status === NativeStatus.Ok) return decodeValue(result as Buffer);
    if (status === NativeStatus.Busy) throw new SandboxError("BUSY", "cannot read a global while an eval runs");
    if (status === NativeStatus.StackOverflow) throw new SandboxError("STACK_OVERFLOW", String(result));
    throw new SandboxError("UNSERIALIZABLE", String(result));
  }

  /**
   * Names of the guest's global object properties (built-ins included, in creation order), at
   * most `limit` (default 10000). Read natively: no guest code, getter, Proxy trap or
   * guest-replaceable built-in runs, so a guest that replaced `Object.getOwnPropertyNames` or
   * defined millions of globals costs the caller nothing extra. Throws `BUSY` during an eval.
   */
  globalNames(limit = 10_000): string[] {
    checkInteger("limit", limit, 0, 2 ** 32 - 1);
    const names = this.#live().globalNames(limit);
    if (names === "BUSY") throw new SandboxError("BUSY", "cannot list globals while an eval runs");
    return names;
  }

  /** Memory of the guest runtime. */
  memoryUsage(): MemoryUsage {
    const [usedBytes, peakBytes, limitBytes] = this.#live().memoryUsage();
    return { usedBytes, peakBytes, limitBytes };
  }

  /**
   * Runs `code` inline on the calling thread and returns the completion value of its last
   * statement. Throws {@link SandboxError}. For short computations: it blocks the event loop.
   * A completion value that is a promise is settled by running the guest's pending jobs within the
   * budget (`Promise.resolve(7)` gives 7; a rejection throws `GUEST_ERROR`); one that still waits
   * after that (nothing left that could settle it) is returned as the promise itself.
   */
  evalSync(code: string, options?: EvalOptions): unknown {
    const report = this.runSync(code, options);
    if (!report.ok) throw report.error;
    return report.value;
  }

  /** Like {@link Sandbox.evalSync}, but failures are returned as data with console and stats. */
  runSync(code: string, options?: EvalOptions): EvalReport {
    const o = validateEvalOptions(code, options);
    if (o.signal?.aborted) return this.#report(this.#stubOutcome(NativeStatus.Aborted), 0, o);
    const handle = this.#live();
    if (this.#broken) return this.#report(this.#stubOutcome(NativeStatus.Broken), 0, o);
    // Evals run in call order: an inline eval cannot wait for queued async ones, so it refuses.
    if (this.#asyncEvals > 0) return this.#report(this.#stubOutcome(NativeStatus.Busy), 0, o);
    this.#startClock(handle, o);
    const started = performance.now();
    const extras = handle.evalSync(code, o.filename ?? "<eval>", o.timeoutMs ?? this.#options.executionTimeoutMs, o.unserializable === "describe");
    const s = native.syncStats;
    const inExchange = s[7]!;
    const value = inExchange >= 0 ? exchange.subarray(0, inExchange) : extras?.[0];
    const raw: NativeOutcome = [s[0]!, value, extras?.[1] ?? "", s[1]!, extras?.[2], s[2] === 1, s[3]!, s[4]!, s[5]!, s[6]!];
    return this.#report(raw, performance.now() - started, o);
  }

  /**
   * Runs `code` on an executor thread and resolves with the completion value of its last
   * statement; top-level `await` works. Rejects with {@link SandboxError}.
   * A completion value that is a promise (a floating `(async () => {...})()`) is awaited within
   * the eval's budgets: its value is the result and a rejection is a `GUEST_ERROR`. Its state is
   * read directly, so no guest `then` runs and a thenable that is not a promise stays a value. A
   * promise that can never settle (no jobs, no host call in flight) is returned as the promise.
   * Host calls the guest did not await are cut off when the eval ends (their signals fire).
   */
  async eval(code: string, options?: EvalOptions): Promise<unknown> {
    const report = await this.run(code, options);
    if (!report.ok) throw report.error;
    return report.value;
  }

  /** Like {@link Sandbox.eval}, but failures are returned as data with console and stats. */
  async run(code: string, options?: EvalOptions): Promise<EvalReport> {
    const o = validateEvalOptions(code, options);
    if (this.#reentered()) return this.#report(this.#stubOutcome(NativeStatus.Busy), 0, o);
    return this.#enqueue(() => this.#runNow(code, o));
  }

  // Runs `work` after every queued eval (and queued snapshot) has finished.
  async #enqueue<T>(work: () => Promise<T>): Promise<T> {
    const previous = this.#queue;
    let release!: () => void;
    this.#queue = new Promise((resolve) => (release = resolve));
    this.#asyncEvals++;
    try {
      await previous;
      return await work();
    } finally {
      this.#asyncEvals--;
      release();
    }
  }

  async #runNow(code: string, o: EvalOptions): Promise<EvalReport> {
    if (!this.#handle) return this.#report(this.#stubOutcome(NativeStatus.Disposed), 0, o);
    if (this.#broken) return this.#report(this.#stubOutcome(NativeStatus.Broken), 0, o);
    if (o.signal?.aborted) return this.#report(this.#stubOutcome(NativeStatus.Aborted), 0, o);
    const handle = this.#handle;
    this.#startClock(handle, o);
    const evalId = ++this.#evalSeq;
    const started = performance.now();
    // Set before the eval starts: an inline eval makes its host calls inside evalAsync.
    this.#onConsole = o.onConsole;
    this.#currentEvalId = evalId;
    this.#pendingCalls.evalId = evalId;
    const pending = handle.evalAsync(code, o.filename ?? "<eval>", o.timeoutMs ?? this.#options.executionTimeoutMs, o.unserializable === "describe", evalId, o.onConsole !== undefined, o.inline === true);
    if (!pending) {
      this.#onConsole = undefined;
      this.#currentEvalId = 0;
      this.#pendingCalls.evalId = 0;
      return this.#report(this.#stubOutcome(NativeStatus.Busy), 0, o);
    }
    const wallMs = o.wallTimeoutMs ?? this.#options.wallTimeoutMs;
    const timer = setTimeout(() => this.#handle?.stop(NativeStop.WallBudget, evalId), wallMs);
    const onAbort = (): void => this.#handle?.stop(NativeStop.Abort, evalId);
    o.signal?.addEventListener("abort", onAbort, { once: true });
    let raw: NativeOutcome;
    try {
      raw = await pending;
    } finally {
      clearTimeout(timer);
      o.signal?.removeEventListener("abort", onAbort);
      this.#currentEvalId = 0;
      this.#onConsole = undefined;
      this.#pendingCalls.evalId = 0;
      for (const controller of this.#pendingCalls.values()) controller.abort(new SandboxError("ABORTED", "the eval that made this call has ended"));
      this.#pendingCalls.clear();
    }
    if (raw[0] === NativeStatus.Timeout && raw[2]) this.#broken = true; // the watchdog answered
    return this.#report(raw, performance.now() - started, o, wallMs);
  }

  #stubOutcome(status: NativeStatus): NativeOutcome {
    return [status, undefined, "", NativeStop.None, undefined, false, 0, 0, 0, 0];
  }

  #report(raw: NativeOutcome, wallMs: number, o: EvalOptions, wallBudgetMs?: number): EvalReport {
    const [status, valueBytes, message, stop, consoleBytes, rawTruncated, executionMs, hostCalls, memoryUsedBytes, peakMemoryBytes] = raw;
    const stats: EvalStats = { executionMs, wallMs, hostCalls, memoryUsedBytes, peakMemoryBytes };
    const kept = consoleBytes ? formatConsole(consoleBytes, this.#options.maxConsoleBytes) : { entries: [], truncated: false };
    const console = kept.entries;
    const consoleTruncated = rawTruncated || kept.truncated;
    if (status === NativeStatus.Ok) {
      try {
        return { ok: true, value: valueBytes ? decodeValue(valueBytes) : undefined, console, consoleTruncated, stats };
      } catch (err) {
        return { ok: false, error: err as SandboxError, console, consoleTruncated, stats };
      }
    }
    const error = this.#errorOf(status, valueBytes, message, stop, o, wallBudgetMs);
    return { ok: false, error, console, consoleTruncated, stats };
  }

  #errorOf(status: NativeStatus, valueBytes: Buffer | undefined, message: string, stop: number, o: EvalOptions, wallBudgetMs?: number): SandboxError {
    switch (status) {
      case NativeStatus.GuestError:
      case NativeStatus.SyntaxError: {
        let thrown: unknown;
        try {
          thrown = valueBytes ? decodeValue(valueBytes) : undefined;
        } catch {
          thrown = new Error("the thrown value could not be copied out");
        }
        const guest = guestInfo(thrown);
        const text = guest.nonError ? guest.message : `${guest.name}: ${guest.message}`;
        return new SandboxError(status === NativeStatus.SyntaxError ? "SYNTAX_ERROR" : "GUEST_ERROR", text, { guest });
      }
      case NativeStatus.Timeout: {
        const budget = stop === NativeStop.WallBudget ? "wall" : "execution";
        const ms = budget === "wall" ? wallBudgetMs ?? o.wallTimeoutMs ?? this.#options.wallTimeoutMs : o.timeoutMs ?? this.#options.executionTimeoutMs;
        const watchdog = message ? `; ${message}` : "";
        return new SandboxError("TIMEOUT", `the ${budget === "wall" ? "wall-clock" : "execution"} budget of ${ms} ms ran out${watchdog}`, { budget });
      }
      case NativeStatus.OutOfMemory:
        return new SandboxError("OUT_OF_MEMORY", `the guest ran out of memory (limit ${this.#options.memoryLimitBytes} bytes)`);
      case NativeStatus.StackOverflow:
        // With a message, the engine refused to start: the calling thread had too little stack left.
        if (message) return new SandboxError("STACK_OVERFLOW", message);
        return new SandboxError("STACK_OVERFLOW", "RangeError: Maximum call stack size exceeded", { guest: { name: "RangeError", message: "Maximum call stack size exceeded" } });
      case NativeStatus.Aborted:
        return new SandboxError("ABORTED", "the eval was aborted");
      case NativeStatus.Disposed:
        return new SandboxError("DISPOSED", "the sandbox was disposed");
      case NativeStatus.Unserializable:
        return new SandboxError("UNSERIALIZABLE", message || "the result cannot be copied out of the sandbox");
      case NativeStatus.Broken:
        return new SandboxError("BROKEN", "the sandbox was stopped while stuck in a built-in that cannot be interrupted; dispose it and create a new one");
      case NativeStatus.CopyLimit:
        return new SandboxError("COPY_LIMIT", `${message || "the eval's output"} would take the host past this eval's copy limit of ${this.#options.copyLimitBytes} bytes (copyLimitBytes; the result, console, thrown value and host-call arguments all count)`);
      case NativeStatus.Busy:
        return new SandboxError("BUSY", "the sandbox is busy: a host function cannot run code in its own sandbox");
      default:
        return new SandboxError("GUEST_ERROR", `unexpected engine status ${status}`);
    }
  }

  /**
   * Captures every global the guest defined (top-level `var`/`let`/`const`/`function`/`class`,
   * assigned globals, `setGlobal` values) as a self-contained snapshot: data in our own format,
   * functions and classes as source text, never engine bytecode. Shared references and cycles
   * are kept; what cannot be stored (closures over a function's locals, Proxies, Promises,
   * symbols...) becomes a placeholder. Host functions are not included: define them again after
   * {@link Sandbox.restore}. Throws `INVALID_SNAPSHOT` over `maxSnapshotBytes`, `BUSY` during an eval.
   */
  snapshot(options?: SnapshotOptions): Uint8Array {
    const resolved = resolveSnapshotOptions(options, this.#options.memoryLimitBytes);
    const handle = this.#live();
    if (this.#broken) throw new SandboxError("BROKEN", "a broken sandbox cannot be snapshotted");
    return takeSnapshot(handle, this.#hostRoots(), resolved, native.engineVersion);
  }

  // Global names the host owns (its functions' roots): snapshots leave them out.
  #hostRoots(): string[] {
    return [...new Set(this.#functions.map((f) => f.name.split(".")[0]!))];
  }

  /**
   * Like {@link Sandbox.snapshot}, but the state is walked on an executor thread and the body
   * deflated on the libuv pool, so a large state never stalls the Node event loop. Waits for queued
   * evals, and evals queued after it wait for it.
   */
  async snapshotAsync(options?: SnapshotOptions): Promise<Uint8Array> {
    const resolved = resolveSnapshotOptions(options, this.#options.memoryLimitBytes);
    this.#live();
    if (this.#reentered()) throw new SandboxError("BUSY", "a host function cannot snapshot its own sandbox");
    return this.#enqueue(async () => {
      const handle = this.#live();
      if (this.#broken) throw new SandboxError("BROKEN", "a broken sandbox cannot be snapshotted");
      const evalId = ++this.#evalSeq;
      const pending = handle.writeSnapshotAsync(this.#hostRoots(), maxSnapshotBody(resolved), evalId);
      if (!pending) throw new SandboxError("BUSY", "cannot take a snapshot while an eval runs");
      const raw = await pending;
      const written = raw[10];
      if (raw[0] !== NativeStatus.Ok || !written) throw this.#errorOf(raw[0], undefined, raw[2], raw[3], {});
      return sealSnapshotAsync(written, raw[1], resolved, native.engineVersion);
    });
  }

  /**
   * Creates a sandbox from a {@link Sandbox.snapshot}. Sizes, header and digest (or signature,
   * with `signing`) are checked before the body is read; anything truncated, altered, oversized,
   * or signed for another thread or turn throws `INVALID_SNAPSHOT`. Functions and classes are
   * re-created from their source under `restoreTimeoutMs`. Placeholders throw
   * `Value for 'NAME' was not restored because it is not serializable (type: TYPE).` when read;
   * `notRestored` lists them.
   */
  static restore(bytes: Uint8Array, options?: RestoreOptions): RestoredSandbox {
    const split = splitRestoreOptions(options);
    const sandboxOptions = validateOptions(split.sandbox);
    // The envelope is checked before a runtime exists: refusals cost no sandbox.
    const body = openSnapshot(bytes, resolveSnapshotOptions(split.snapshot, sandboxOptions.memoryLimitBytes));
    const sandbox = new Sandbox(split.sandbox);
    try {
      const notRestored = restoreBody(sandbox.#live(), body, split.restoreTimeoutMs ?? sandbox.#options.executionTimeoutMs);
      return { sandbox, notRestored };
    } catch (err) {
      sandbox.dispose();
      throw err;
    }
  }

  /**
   * Like {@link Sandbox.restore}, but the body is read on an executor thread, under the restore's
   * execution budget and the sandbox's wall-clock budget: re-creating functions and classes runs
   * guest code (a class `static {}` block, for one), which this way never runs on the Node main
   * thread. The envelope checks (sizes, header, digest or signature, inflating) are linear and
   * capped by `maxSnapshotBytes`, and run before. Rejects with the same errors as `restore`.
   */
  static async restoreAsync(bytes: Uint8Array, options?: RestoreOptions): Promise<RestoredSandbox> {
    const split = splitRestoreOptions(options);
    const sandboxOptions = validateOptions(split.sandbox);
    const body = openSnapshot(bytes, resolveSnapshotOptions(split.snapshot, sandboxOptions.memoryLimitBytes));
    const sandbox = new Sandbox(split.sandbox);
    try {
      const notRestored = await sandbox.#restoreOffThread(body, split.restoreTimeoutMs ?? sandbox.#options.executionTimeoutMs);
      return { sandbox, notRestored };
    } catch (err) {
      sandbox.dispose();
      throw err;
    }
  }

  async #restoreOffThread(body: Buffer, budgetMs: number): Promise<NotRestored[]> {
    const handle = this.#live();
    const evalId = ++this.#evalSeq;
    const pending = handle.restoreAsync(body, budgetMs, evalId);
    if (!pending) throw new SandboxError("BUSY", "cannot restore into a sandbox while an eval runs");
    const wallMs = this.#options.wallTimeoutMs;
    const timer = setTimeout(() => this.#handle?.stop(NativeStop.WallBudget, evalId), wallMs);
    let raw: NativeOutcome;
    try {
      raw = await pending;
    } finally {
      clearTimeout(timer);
    }
    if (raw[0] === NativeStatus.Timeout && raw[2]) this.#broken = true; // the watchdog answered
    const read = raw[10];
    if (raw[0] !== NativeStatus.Ok || !read) throw this.#errorOf(raw[0], undefined, raw[2], raw[3], { timeoutMs: budgetMs }, wallMs);
    return restoredList(read);
  }

  /**
   * Frees the runtime. Safe at any time and more than once: a running eval rejects with
   * `DISPOSED`, pending host calls' signals fire, queued evals reject with `DISPOSED`.
   */
  dispose(): void {
    const handle = this.#handle;
    if (!handle) return;
    this.#handle = undefined;
    for (const controller of this.#pendingCalls.values()) controller.abort(new SandboxError("DISPOSED", "the sandbox was disposed"));
    this.#pendingCalls.clear();
    handle.dispose();
  }

  /** Same as {@link Sandbox.dispose}, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}

// The cap is exact here, in UTF-8 bytes of the formatted text; the engine keeps a looser bound on
// the raw arguments so a console flood cannot exhaust memory before we get to count.
function formatConsole(bytes: Buffer, maxBytes: number): { entries: ConsoleEntry[]; truncated: boolean } {
  const entries: ConsoleEntry[] = [];
  let used = 0;
  for (const { level, args } of decodeConsole(bytes)) {
    // Rendered within what is left of the cap: shared sub-trees and huge objects cost no more.
    const text = formatConsoleArgs(args, maxBytes - used + 1);
    used += Buffer.byteLength(text);
    if (used > maxBytes) return { entries, truncated: true };
    entries.push({ level: CONSOLE_LEVELS[level] ?? "log", text });
  }
  return { entries, truncated: false };
}
