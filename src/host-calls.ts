/**
 * Host calls of one sandbox: the functions it exposes to the guest, the dispatchers the addon calls
 * on the main thread for each guest call (sync, async, the primitive fast path, streamed console
 * lines), the signals of calls in flight, and the re-entry check that keeps a host function from
 * running code in its own sandbox.
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { formatWithOptions } from "node:util";
import { SandboxError } from "./errors.js";
import type { DecodeQueue } from "./decode-queue.js";
import { ValueDecoder, decodeScalarArguments, encodeValueInSlices, encodeValueInto } from "./marshal.js";
import {
  BOUNDARY_SIZES,
  DispatchKind,
  type HostCallAnswer,
  PrimitiveSlot,
  native,
  type NativeDispatcher,
  type NativeHandle,
  type NativePrimitiveDispatcher,
} from "./native.js";
import { CONSOLE_LEVELS, refusal, throwIfFailed } from "./outcomes.js";
import {
  answerSyncCall,
  appendHostResult,
  defineFrozenHostFunction,
  defineHostFunction,
  settleHostCall,
} from "./request.js";
import { formatConsoleArgs } from "./render.js";
import type { EvalObservation, HostCallObservation } from "./telemetry/hub.js";
import type { AsyncHostFunction, ConsoleEntry, HostCallContext, HostFunction } from "./types.js";
import { perTurnBudget } from "./turn-budget.js";
import { invalid, validatePath } from "./validate.js";

// Shared with the addon (one per Node environment): host call arguments and results of usual size
// cross without allocation. Every use is a synchronous write-then-read, so sandboxes can share it.
const exchange: Buffer = native.exchange;

/** Whose host functions are running in the current async context (re-entry check). */
const hostCallContext = new AsyncLocalStorage<ReadonlySet<HostCalls>>();

const MAX_PRIMITIVE_CHARS = BOUNDARY_SIZES.maxPrimitiveChars;

// A guest that awaits host calls in a loop gets each answer within microseconds: the addon's settle
// then waits briefly for its next call and dispatches it before returning, in the same turn of the
// event loop. Once a turn has handed out results for 1 ms, the next result waits for the next
// turn, so timers and I/O run at least that often.
const turnHasRoom = perTurnBudget(1);

// The numbers of a primitive host call (see NativePrimitiveDispatcher), shared with the addon like
// `exchange`; the positions as plain constants, which the optimizing compiler folds into the loads.
const primitiveSlots: Float64Array = native.primitiveSlots;
const {
  call: SLOT_CALL,
  arg0: SLOT_ARG0,
  arg1: SLOT_ARG1,
  arg2: SLOT_ARG2,
  result: SLOT_RESULT,
  hasResult: SLOT_HAS_RESULT,
} = PrimitiveSlot;

/** A host result the addon copies without the codec (the boundary table's maxPrimitiveChars). */
function passesAsIs(v: unknown): boolean {
  const t = typeof v;
  return (
    t === "number" ||
    v === undefined ||
    v === null ||
    t === "boolean" ||
    (t === "string" && (v as string).length <= MAX_PRIMITIVE_CHARS)
  );
}

/** A sync host function called with the primitive fast path's `argc` arguments. */
function callWith(fn: HostFunction, argc: number, a0: unknown, a1: unknown, a2: unknown): unknown {
  return argc === 1 ? fn(a0) : argc === 0 ? fn() : argc === 2 ? fn(a0, a1) : fn(a0, a1, a2);
}

/** {@link callWith} for an observed call. */
function observedPrimitive(
  call: HostCallObservation,
  fn: HostFunction,
  argc: number,
  a0: unknown,
  a1: unknown,
  a2: unknown,
): unknown {
  return call.whole(() => callWith(fn, argc, a0, a1, a2));
}

/** A sync host function called with decoded `args`, in an observed call's context. */
function observedSync(call: HostCallObservation, fn: HostFunction, args: unknown[]): unknown {
  return call.run(() => fn(...args));
}

/** Bytes of a host call's answer copied into the guest (an error's text is not counted). */
function answerBytes(answer: unknown): number {
  if (answer instanceof Appended) return answer.bytes;
  return typeof answer === "number" ? answer : Buffer.isBuffer(answer) ? answer.length : 0;
}

/** Bytes of an async call's result the addon already holds, a piece per turn (see HostCalls#handOver). */
class Appended {
  constructor(readonly bytes: number) {}
}

/** Bytes of a result handed to the addon per turn of the event loop: one copy of about a millisecond. */
const HANDOVER_PIECE_BYTES = 1024 * 1024;

function evalEndedError(): SandboxError {
  return new SandboxError("ABORTED", "the eval that made this call has ended");
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

/** Execution budget of the sandbox's own short guest steps (removing a global). */
export const HOST_STEP_BUDGET_MS = 100;

/** Guest code that deletes the global at a validated dotted `path`; its completion value is `delete`'s. */
export function removeCode(path: string): string {
  const segments = path.split(".");
  const target = segments
    .map((segment, i) => `${i === segments.length - 1 ? "?." : ""}[${JSON.stringify(segment)}]`)
    .join("");
  return `try { delete globalThis${target} } catch {}`;
}

/** The abort controllers of the current eval's async calls in flight, tagged with that eval's id. */
type PendingSignals = Map<number, AbortController> & { evalId?: number };

interface RegisteredFunction {
  name: string;
  fn: HostFunction | AsyncHostFunction;
  async: boolean;
}

/**
 * What an async host function gets beside its arguments. A class rather than an object literal
 * with a `signal` getter: V8 builds such a literal through its runtime (an accessor definition and
 * a map normalization per call), which cost microseconds of the main thread per awaited call.
 * Most host functions never look at their signal, so its controller is created on first read.
 */
class CallContext implements HostCallContext {
  readonly #pendingCalls: PendingSignals;
  readonly #callId: number;
  readonly #evalId: number;
  #controller: AbortController | undefined;

  constructor(pendingCalls: PendingSignals, callId: number, evalId: number) {
    this.#pendingCalls = pendingCalls;
    this.#callId = callId;
    this.#evalId = evalId;
  }

  get signal(): AbortSignal {
    if (!this.#controller) {
      this.#controller = new AbortController();
      if (this.#evalId === this.#pendingCalls.evalId) this.#pendingCalls.set(this.#callId, this.#controller);
      else this.#controller.abort(evalEndedError());
    }
    return this.#controller.signal;
  }
}

/** The host-call side of one {@link Sandbox}. */
export class HostCalls {
  readonly #functions: RegisteredFunction[] = [];
  /** The sandbox's live handle, undefined once it is disposed. */
  readonly #handleOf: () => NativeHandle | undefined;
  readonly #maxConsoleBytes: number;
  // What the guest sends (host-call arguments, console lines, results), decoded in order and in
  // slices that let the event loop turn; shared with the sandbox, which decodes outcomes through it.
  readonly #decodes: DecodeQueue;
  #currentEvalId = 0;
  // Signals of the current eval's host calls that asked for one; tagged with that eval's id.
  readonly #pendingCalls: PendingSignals = new Map();
  #inSyncHostCall = 0;
  #onConsole: ((entry: ConsoleEntry) => void) | undefined; // live console listener of the running eval
  // The async context of a host call made outside any host function (the usual case), built once.
  readonly #selfOnly: ReadonlySet<HostCalls> = new Set([this]);
  // The running eval when a telemetry consumer observes it: its host calls are reported.
  #observation: EvalObservation | undefined;

  constructor(handleOf: () => NativeHandle | undefined, maxConsoleBytes: number, decodes: DecodeQueue) {
    this.#handleOf = handleOf;
    this.#maxConsoleBytes = maxConsoleBytes;
    this.#decodes = decodes;
  }

  /**
   * Called by the addon for every guest call of a host function (main thread). The arguments are
   * decoded in the order the calls came (see {@link DecodeQueue}), so a call may be handled after
   * this returns: a sync call with a `callId` is then answered through answerSync (its guest waits
   * on an executor thread); one without must be answered now (its guest runs on this thread).
   */
  readonly dispatch: NativeDispatcher = (kind, fnId, callId, argLength, argBytes, evalId) => {
    if (kind === DispatchKind.AsyncCall && !argBytes && !this.#decodes.busy) {
      // The usual call: a few scalars, nothing queued before it. Decoded at once, without a decoder.
      const entry = this.#functions[fnId];
      const args = entry && decodeScalarArguments(exchange, argLength);
      if (args) {
        this.#callAsync(entry, args, callId, evalId, argLength);
        return undefined;
      }
    }
    const decoder = new ValueDecoder(argBytes ?? exchange.subarray(0, argLength));
    const decode = (use: (args: unknown[]) => void, fail: (err: SandboxError) => void): void => {
      if (!this.#decodes.push(decoder, use as (args: unknown) => void, fail) && !argBytes) decoder.detach(); // the exchange buffer is reused
    };
    if (kind === DispatchKind.Console) {
      decode(
        (args) => this.#streamConsole(fnId, args, evalId),
        () => {},
      );
      return undefined;
    }
    const entry = this.#functions[fnId];
    if (!entry) return ["Error", "unknown host function"];
    if (kind === DispatchKind.AsyncCall) {
      const refuse = (err: SandboxError): void => {
        const handle = this.#handleOf();
        if (evalId === this.#currentEvalId && handle) settleHostCall(handle, callId, false, hostErrorOf(err), false);
      };
      decode((args) => this.#callAsync(entry, args, callId, evalId, argLength), refuse);
      return undefined;
    }
    let answer: HostCallAnswer | undefined;
    let parked = false;
    const reply = (result: HostCallAnswer): void => {
      if (!parked) answer = result;
      else {
        const handle = this.#handleOf();
        if (handle) answerSyncCall(handle, callId, result);
      }
    };
    decode(
      (args) => reply(this.#callSync(entry, args, argLength) as HostCallAnswer),
      (err) => reply(hostErrorOf(err)),
    );
    if (callId === 0) this.#decodes.flush();
    parked = answer === undefined;
    return answer;
  };

  /**
   * The addon's fast path for sync host calls of inline evals with primitive arguments (the
   * `argc` first of a0..a2, numbers from the slots), for the function `fnId`. Per call it allocates
   * nothing.
   */
  readonly dispatchPrimitive: NativePrimitiveDispatcher = (a0, a1, a2) => {
    // Read first: the host function's own host calls (into other sandboxes) reuse the slots.
    const call = primitiveSlots[SLOT_CALL]!;
    const low = call & 31; // an int operation (`%` on a double is a call); exact, as 2 ** 32 is a multiple of 32
    if (low & 4) a0 = primitiveSlots[SLOT_ARG0];
    if (low & 8) a1 = primitiveSlots[SLOT_ARG1];
    if (low & 16) a2 = primitiveSlots[SLOT_ARG2];
    const entry = this.#functions[(call - low) / 32];
    if (!entry) return ["Error", "unknown host function"];
    if (this.#decodes.busy) this.#decodes.flush(); // calls the guest made earlier reach the host first
    this.#inSyncHostCall++;
    try {
      const fn = entry.fn as HostFunction;
      const argc = low & 3;
      // Observed calls take a method of their own: a closure here would move this function's
      // variables into a heap context on every call, observed or not.
      const observation = this.#observation;
      const result =
        observation === undefined
          ? callWith(fn, argc, a0, a1, a2)
          : observedPrimitive(observation.callStarted(entry.name, 0), fn, argc, a0, a1, a2);
      if (typeof result === "number") {
        primitiveSlots[SLOT_RESULT] = result;
        primitiveSlots[SLOT_HAS_RESULT] = 1;
        return undefined;
      }
      return passesAsIs(result) ? result : this.#syncAnswer(entry, result, true);
    } catch (err) {
      return hostErrorOf(err);
    } finally {
      this.#inSyncHostCall--;
    }
  };

  /**
   * Defines `fn` in the guest at `name` (a global or a dotted path) and registers it for dispatch.
   * Throws `INVALID_ARGUMENT`, `BUSY` during an eval, `STACK_OVERFLOW` on a thread with too little stack.
   */
  define(handle: NativeHandle, name: string, fn: HostFunction | AsyncHostFunction, async: boolean): void {
    validatePath(name);
    if (typeof fn !== "function") throw invalid("fn must be a function");
    const fnId = this.#functions.length;
    throwIfFailed(defineHostFunction(handle, name, fnId, async), "define a function", `cannot define '${name}'`);
    this.#functions.push({ name, fn, async });
  }

  /**
   * Installs `fn` as the frozen, read-only, non-configurable global function `name` and registers
   * it for dispatch; false (nothing registered) when the guest holds a global `name` it cannot lose.
   * The addon builds and defines it through the C API: no guest code runs. Throws `BUSY` during an
   * eval, `STACK_OVERFLOW` on a thread with too little stack, `OUT_OF_MEMORY`.
   */
  defineFrozen(handle: NativeHandle, name: string, fn: AsyncHostFunction): boolean {
    const result = defineFrozenHostFunction(handle, name, this.#functions.length);
    if (typeof result !== "boolean") throw refusal(result, "install a frozen function", `cannot install '${name}'`);
    if (result) this.#functions.push({ name, fn, async: true });
    return result;
  }

  /** Global names the host's functions live under (their first path segments). */
  roots(): string[] {
    return [...new Set(this.#functions.map((f) => f.name.split(".")[0]!))];
  }

  /** True inside one of this sandbox's host functions (sync, or async in its async context). */
  reentered(): boolean {
    return this.#inSyncHostCall > 0 || hostCallContext.getStore()?.has(this) === true;
  }

  /** Reports the host calls of the eval about to run to `observation` (undefined: to nobody). */
  observe(observation: EvalObservation | undefined): void {
    this.#observation = observation;
  }

  /** True while a call of the running eval is in flight with a signal that its end would fire. */
  get callsInFlight(): boolean {
    return this.#pendingCalls.size > 0;
  }

  /** The eval `evalId` starts: its async calls get signals, its console lines go to `onConsole`. */
  beginEval(evalId: number, onConsole: ((entry: ConsoleEntry) => void) | undefined): void {
    this.#onConsole = onConsole;
    this.#currentEvalId = evalId;
    this.#pendingCalls.evalId = evalId;
  }

  /**
   * The running eval ended (or never started): late results are dropped; with `abortCalls`, the
   * signals of its calls in flight fire with an `ABORTED` error.
   */
  endEval(abortCalls = false): void {
    this.#currentEvalId = 0;
    this.#onConsole = undefined;
    this.#pendingCalls.evalId = 0;
    // Built only when a signal needs it: an error captures a stack, which costs as much as a short eval.
    if (abortCalls && this.#pendingCalls.size > 0) this.abortPending(evalEndedError);
  }

  /** Fires the signal of every call in flight that asked for one, with the error `reason` makes (made only then). */
  abortPending(reason: () => SandboxError): void {
    if (this.#pendingCalls.size === 0) return;
    const error = reason();
    for (const controller of this.#pendingCalls.values()) controller.abort(error);
    this.#pendingCalls.clear();
  }

  #streamConsole(level: number, args: unknown[], evalId: number): void {
    const listener = this.#onConsole;
    if (!listener || evalId !== this.#currentEvalId) return;
    try {
      listener({ level: CONSOLE_LEVELS[level] ?? "log", text: formatConsoleArgs(args, this.#maxConsoleBytes) });
    } catch {
      // a failing progress listener must not disturb the eval
    }
  }

  // Calls `entry` with the decoded `args` (`argumentBytes` of them) and answers with the result's bytes.
  #callSync(entry: RegisteredFunction, args: unknown[], argumentBytes: number): unknown {
    this.#inSyncHostCall++;
    const call = this.#observation?.callStarted(entry.name, argumentBytes);
    try {
      // Re-entry from a sync host function is caught by #inSyncHostCall, so no async context is needed.
      const fn = entry.fn as HostFunction;
      const answer = this.#syncAnswer(entry, call === undefined ? fn(...args) : observedSync(call, fn, args), false);
      call?.finished(!Array.isArray(answer), answerBytes(answer));
      return answer;
    } catch (err) {
      call?.finished(false, 0);
      return hostErrorOf(err);
    } finally {
      this.#inSyncHostCall--;
    }
  }

  // A sync host function's result as the addon takes it: its bytes ([bytes] on the primitive fast
  // path), or [name, message] for a promise. Throws when the result cannot be copied.
  #syncAnswer(entry: RegisteredFunction, result: unknown, primitivePath: boolean): unknown {
    if (result instanceof Promise) {
      result.catch(() => {});
      return ["TypeError", `host function '${entry.name}' returned a promise; register it with defineAsyncFunction`];
    }
    const bytes = encodeValueInto(result, exchange);
    return primitivePath ? [bytes] : bytes;
  }

  // Hands an async call's answer to the guest of eval `evalId`, or calls `again` with it on the
  // next turn of the event loop when this turn's time is spent.
  #answer(
    callId: number,
    evalId: number,
    ok: boolean,
    result: HostCallAnswer | Appended,
    again: (ok: boolean, result: Buffer | [string, string] | Appended) => void,
  ): void {
    const handle = this.#handleOf();
    if (evalId !== this.#currentEvalId || !handle) return;
    if (!turnHasRoom()) {
      // Settled on the next turn of the event loop, from its own copy of the exchange bytes.
      const kept = typeof result === "number" ? Buffer.from(exchange.subarray(0, result)) : result;
      setImmediate(again, ok, kept);
      return;
    }
    // The guest's next call, when it comes at once, is dispatched inside this settle: not from
    // within a host function's async context, which it would inherit (the re-entry check).
    settleHostCall(
      handle,
      callId,
      ok,
      result instanceof Appended ? null : result,
      hostCallContext.getStore() === undefined,
    );
  }

  // Hands the addon an encoded result of megabytes a piece per turn of the event loop (its settle
  // would copy all of it in one go), then settles the call with what it gathered.
  async #handOver(
    callId: number,
    evalId: number,
    encoded: Buffer,
    settle: (ok: boolean, result: Buffer | Appended) => void,
  ): Promise<void> {
    for (let at = 0; at < encoded.length; at += HANDOVER_PIECE_BYTES) {
      const handle = this.#handleOf();
      if (evalId !== this.#currentEvalId || !handle) return settle(true, encoded); // an ended eval's: dropped
      appendHostResult(handle, callId, encoded.subarray(at, at + HANDOVER_PIECE_BYTES), encoded.length);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    settle(true, new Appended(encoded.length));
  }

  #callAsync(entry: RegisteredFunction, args: unknown[], callId: number, evalId: number, argumentBytes: number): void {
    const pendingCalls = this.#pendingCalls;
    const context = new CallContext(pendingCalls, callId, evalId);
    let call = this.#observation?.callStarted(entry.name, argumentBytes);
    const settle = (ok: boolean, result: HostCallAnswer | Appended): void => {
      pendingCalls.delete(callId);
      const observed = call;
      call = undefined; // a settle deferred to the next turn comes back here
      observed?.ended(ok, answerBytes(result));
      this.#answer(callId, evalId, ok, result, settle);
      observed?.report(); // after the guest has its answer
    };
    let pending: unknown;
    try {
      const invoke = (): unknown => (entry.fn as AsyncHostFunction)(args, context);
      const observed = call;
      pending = hostCallContext.run(this.#withSelf(), observed === undefined ? invoke : () => observed.run(invoke));
    } catch (err) {
      settle(false, hostErrorOf(err));
      return;
    }
    const refuse = (err: unknown): void =>
      settle(false, [
        "TypeError",
        `the result of '${entry.name}' cannot be copied into the sandbox: ${(err as Error).message}`,
      ]);
    // A result of megabytes is encoded a slice per turn of the event loop, then settled.
    const deliver = (value: unknown): void => {
      let bytes: number | Buffer | Promise<Buffer>;
      try {
        bytes = encodeValueInSlices(value, exchange);
      } catch (err) {
        refuse(err);
        return;
      }
      if (bytes instanceof Promise)
        bytes.then((encoded) => {
          if (encoded.length <= HANDOVER_PIECE_BYTES) settle(true, encoded);
          else void this.#handOver(callId, evalId, encoded, settle);
        }, refuse);
      else settle(true, bytes);
    };
    // Reading `then` can throw (a getter, a revoked Proxy), and so can Promise.resolve (a
    // `constructor` getter): the guest's await then rejects at once, never waits for the wall.
    let then: unknown;
    try {
      then = (pending as { then?: unknown } | null)?.then;
    } catch (err) {
      settle(false, hostErrorOf(err));
      return;
    }
    // A plain (non-thenable) result settles at once, without a trip through the microtask queue.
    if (typeof then !== "function") return deliver(pending);
    try {
      Promise.resolve(pending).then(deliver, (err: unknown) => settle(false, hostErrorOf(err)));
    } catch (err) {
      settle(false, hostErrorOf(err));
    }
  }

  #withSelf(): ReadonlySet<HostCalls> {
    const outer = hostCallContext.getStore();
    if (!outer) return this.#selfOnly;
    if (outer.has(this)) return outer;
    return new Set([...outer, this]);
  }
}
