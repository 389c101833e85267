/**
 * The engine's public class. Argument checks live in src/validate.ts, host-call dispatch in
 * src/host-calls.ts, native outcomes become reports and typed errors in src/outcomes.ts, the eval
 * queue is src/eval-queue.ts and eval telemetry src/telemetry/observed-evals.ts; this file holds
 * the sandbox's lifecycle, how an eval runs on the engine, and its public methods.
 */
import { performance } from "node:perf_hooks";
import { DecodeQueue } from "./decode-queue.js";
import { SandboxError } from "./errors.js";
import { HOST_STEP_BUDGET_MS, HostCalls, removeCode } from "./host-calls.js";
import { EvalQueue, mayAnswerNow } from "./eval-queue.js";
import { encodeValue } from "./marshal.js";
import { SANDBOX_LIMITS } from "./options.js";
import { observeEval, sandboxClosed, sandboxOpened, traceOperation, type EvalObservation } from "./telemetry/hub.js";
import { ObservedEvals } from "./telemetry/observed-evals.js";
import {
  isNativeError,
  JobKind,
  native,
  NativeStatus,
  outcomeOf,
  type AnsweredHere,
  type NativeError,
  type NativeHandle,
  type NativeOutcome,
  type NativeOutcomeSlots,
} from "./native.js";
import {
  decodeAtOnce,
  decodeOutcome,
  copyOutOfExchange,
  errorOf,
  globalValueOf,
  limitsOf,
  refusal,
  reportOf,
  settledWithin,
  stubOutcome,
  syncOutcome,
  throwIfFailed,
  promisedValue,
  valueOfReport,
  type DecodedOutcome,
} from "./outcomes.js";
import {
  maxSnapshotBody,
  openSnapshot,
  resolveSnapshotOptions,
  restoreBody,
  restoredList,
  sealWrittenSnapshot,
  splitRestoreOptions,
  takeSnapshot,
  type RestoredSandbox,
  type RestoreOptions,
  type SnapshotAfterEval,
  type SnapshotAfterRun,
  type SnapshotOptions,
} from "./snapshot.js";
import { type ArgumentsSchema, checkedAsyncFunction, checkedFunction } from "./host-schema.js";
import type {
  AsyncHostFunction,
  EvalOptions,
  SourceCode,
  EvalReport,
  HostCallContext,
  HostFunction,
  MemoryUsage,
  NotRestored,
  ResolvedSandboxOptions,
  SandboxOptions,
} from "./types.js";
import {
  createHandle,
  globalNamesOf,
  requestEval,
  requestSnapshot,
  GuestClockInForce,
  setGuestRandomSeed,
  stopEval,
} from "./request.js";
import {
  checkFunctionName,
  checkGlobalName,
  checkInteger,
  evalClockMs,
  invalid,
  validateEvalOptions,
  validateOptions,
  validatePath,
} from "./validate.js";

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
  readonly #options: ResolvedSandboxOptions;
  readonly #id: number; // its number for telemetry
  readonly #observed: ObservedEvals; // the evals a telemetry consumer observes
  #handle: NativeHandle | undefined;
  readonly #host: HostCalls;
  readonly #decodes = new DecodeQueue(); // what the guest sends, decoded in order and in slices
  readonly #queue = new EvalQueue(this.#runNow.bind(this)); // eval()/run() calls and off-thread snapshots, in call order
  #evalSeq = 0;
  #broken = false;
  readonly #clock = new GuestClockInForce();

  /** Creates a sandbox. Throws `INVALID_ARGUMENT` for bad options. */
  constructor(options?: SandboxOptions) {
    this.#options = validateOptions(options);
    const o = this.#options;
    this.#host = new HostCalls(() => this.#handle, o.maxConsoleBytes, this.#decodes);
    this.#observed = new ObservedEvals(this.#host);
    try {
      this.#handle = createHandle(o, this.#host.dispatch, this.#host.dispatchPrimitive);
    } catch (err) {
      throw refusal(err, "create the sandbox", "could not create the sandbox");
    }
    setGuestRandomSeed(this.#handle, o.randomSeed);
    this.#id = sandboxOpened();
  }

  // Sets the guest clock (and, when asked, the Math.random seed) for the eval about to start; the
  // engine is idle here (a busy engine refuses it, and then refuses the eval too).
  #startClock(handle: NativeHandle, o: EvalOptions): void {
    const ms = o.clockMs ?? evalClockMs(this.#options.clock);
    // A clock.now() is host code: it can dispose this very sandbox.
    if (this.#handle !== handle) throw new SandboxError("DISPOSED", "the sandbox was disposed by its clock.now()");
    this.#clock.set(handle, ms, o.clockMs !== undefined || this.#options.clock !== "real");
    if (o.randomSeed !== undefined) setGuestRandomSeed(handle, o.randomSeed);
  }

  /** True once {@link Sandbox.dispose} ran. */
  get disposed(): boolean {
    return this.#handle === undefined;
  }

  /**
   * True once an eval was stopped by the watchdog while stuck in a built-in that cannot be
   * interrupted (every later eval fails with `BROKEN`), or once its helper process died
   * (`isolation: "process"`; they fail with `WORKER_LOST`). Dispose it; restore the last snapshot.
   */
  get broken(): boolean {
    return this.#brokenStatus() !== undefined;
  }

  /** With `isolation: "process"`, its helper process's id (for monitoring); else undefined. */
  get processId(): number | undefined {
    return this.#handle?.processId;
  }

  /** The options in force, defaults filled in. */
  get options(): Readonly<ResolvedSandboxOptions> {
    return this.#options;
  }

  #report(
    raw: NativeOutcome,
    wallMs: number,
    o: EvalOptions,
    wallBudgetMs?: number,
    decoded?: DecodedOutcome,
  ): EvalReport {
    this.#observed.countOut(raw);
    return reportOf(raw, wallMs, limitsOf(this.#options, o, wallBudgetMs), decoded ?? decodeAtOnce(raw));
  }

  #live(): NativeHandle {
    if (!this.#handle) throw new SandboxError("DISPOSED", "the sandbox is disposed");
    return this.#handle;
  }

  /**
   * Exposes a synchronous host function to the guest as a global (or at a dotted path such as
   * `"tools.lookup"`). Arguments and the result are copied; a thrown host error becomes a guest
   * `Error` with the message only.
   *
   * The arguments are whatever the guest passed (`unknown`). Give an {@link ArgumentsSchema} (zod's
   * `z.tuple([z.number()])`, or any Standard Schema) to receive them parsed and typed: a call whose
   * arguments the schema rejects throws a guest `TypeError` naming the issues, and `fn` does not run.
   */
  defineFunction(name: string, fn: HostFunction): void;
  defineFunction<Args extends unknown[]>(
    name: string,
    schema: ArgumentsSchema<Args>,
    fn: (...args: Args) => unknown,
  ): void;
  defineFunction<Args extends unknown[]>(
    name: string,
    fnOrSchema: HostFunction | ArgumentsSchema<Args>,
    checked?: (...args: Args) => unknown,
  ): void {
    const fn =
      typeof fnOrSchema === "function" || checked === undefined
        ? fnOrSchema
        : checkedFunction(name, fnOrSchema, checked);
    this.#host.define(this.#live(), name, fn as HostFunction, false);
  }

  /**
   * Exposes an asynchronous host function: the guest call returns a promise at once, `fn` runs on
   * the Node main thread with the copied arguments and an `AbortSignal` that fires when the eval
   * ends first, and its result (or error message) settles the guest promise. With an
   * {@link ArgumentsSchema}, `fn` receives the parsed, typed arguments (as with `defineFunction`).
   */
  defineAsyncFunction(name: string, fn: AsyncHostFunction): void;
  defineAsyncFunction<Args extends unknown[]>(
    name: string,
    schema: ArgumentsSchema<Args>,
    fn: (args: Args, context: HostCallContext) => unknown,
  ): void;
  defineAsyncFunction<Args extends unknown[]>(
    name: string,
    fnOrSchema: AsyncHostFunction | ArgumentsSchema<Args>,
    checked?: (args: Args, context: HostCallContext) => unknown,
  ): void {
    const fn =
      typeof fnOrSchema === "function" || checked === undefined
        ? fnOrSchema
        : checkedAsyncFunction(name, fnOrSchema, checked);
    this.#host.define(this.#live(), name, fn as AsyncHostFunction, true);
  }

  /**
   * Installs `name` as a global host service the guest can call but never replace, wrap or delete:
   * `name(request)` copies its one argument to `fn` and returns a promise of the result, as a
   * {@link Sandbox.defineAsyncFunction} function does. The global is read-only, non-enumerable and
   * non-configurable and the function is frozen, so every later eval sees what the host installed.
   * Like other host functions, it is left out of snapshots: install it again after a restore.
   * The addon builds and defines it natively, at once: no guest code runs (a guest that replaced
   * `Object.freeze` or `Object.defineProperty` is not called), and the next eval sees it.
   *
   * Returns false, installing nothing, when the guest already holds a global `name` it cannot lose
   * (a top-level `var name`, say): that guest keeps its own. Throws `INVALID_ARGUMENT` for a name
   * that is not an identifier, `BUSY` while an eval is queued or running, `DISPOSED`.
   */
  defineFrozenAsyncFunction(name: string, fn: AsyncHostFunction): boolean {
    checkFunctionName(name, fn);
    if (this.#queue.busy || this.#host.reentered())
      throw new SandboxError("BUSY", "cannot install a frozen function while an eval runs");
    return this.#host.defineFrozen(this.#live(), name, fn);
  }

  /**
   * Deletes the guest global `path` (a name, or a dotted path such as `"tools.lookup"`), as the
   * guest's own `delete` would. Resolves true when the property is gone (or never was), false when
   * the guest made it undeletable (non-configurable, a frozen parent, a Proxy that refuses or
   * throws). The delete runs on an executor thread under a short execution budget: a guest that
   * replaced a parent with a Proxy runs its trap there, never on the Node main thread.
   */
  async removeGlobal(path: string): Promise<boolean> {
    const report = await this.run(removeCode(validatePath(path)), {
      filename: "<host>",
      timeoutMs: HOST_STEP_BUDGET_MS,
    });
    if (!report.ok && (report.error.code === "DISPOSED" || report.error.code === "BUSY")) throw report.error;
    return report.ok && report.value === true;
  }

  /** Copies `value` into the guest as the global `name`. */
  setGlobal(name: string, value: unknown): void {
    checkGlobalName(name);
    throwIfFailed(this.#live().setGlobal(name, encodeValue(value)), "set a global", `cannot set global '${name}'`);
  }

  /**
   * Copies the guest global `name` out (its own data property; getters are never run). The copy is
   * decoded at once on the calling thread, so its cost grows with the value: to read a large value
   * without holding the event loop, return it from {@link Sandbox.eval}.
   */
  getGlobal(name: string): unknown {
    if (typeof name !== "string" || name.length > SANDBOX_LIMITS.maxGlobalNameChars)
      throw invalid("name must be a string");
    return globalValueOf(this.#live().getGlobal(name));
  }

  /**
   * Names of the guest's global object properties (built-ins included, in creation order), at
   * most `limit` (default 10000, `SANDBOX_LIMITS.globalNames`). Read natively: no guest code, getter, Proxy trap or
   * guest-replaceable built-in runs, so a guest that replaced `Object.getOwnPropertyNames` or
   * defined millions of globals costs the caller nothing extra. Throws `BUSY` during an eval.
   */
  globalNames(limit: number = SANDBOX_LIMITS.globalNames): string[] {
    checkInteger("limit", limit, 0, 2 ** 32 - 1);
    const names = globalNamesOf(this.#live(), limit);
    if (!Array.isArray(names)) throw refusal(names, "list globals", "cannot list globals");
    return names;
  }

  /** Memory of the guest runtime. */
  memoryUsage(): MemoryUsage {
    const [usedBytes, peakBytes, limitBytes] = this.#live().memoryUsage();
    return { usedBytes, peakBytes, limitBytes };
  }

  /**
   * Runs `code` inline on the calling thread and returns the completion value of its last
   * statement. Throws {@link SandboxError}. For short computations: it blocks the event loop, and
   * so does decoding its result, console output and host-call arguments (in one go, whatever
   * their size; {@link Sandbox.eval} decodes them a slice at a time).
   * A completion value that is a promise is settled by running the guest's pending jobs within the
   * budget (`Promise.resolve(7)` gives 7; a rejection throws `GUEST_ERROR`); one that still waits
   * after that (nothing left that could settle it) is returned as the promise itself.
   */
  evalSync(code: SourceCode, options?: EvalOptions): unknown {
    return valueOfReport(this.runSync(code, options));
  }

  /** Like {@link Sandbox.evalSync}, but failures are returned as data with console and stats. */
  runSync(code: SourceCode, options?: EvalOptions): EvalReport {
    const observed = observeEval(this.#id, "evalSync", code, options?.tenant, this.#options.onUsage);
    return observed === undefined ? this.#runSync(code, options) : this.#runSyncObserved(observed, code, options);
  }

  // A method of its own: a closure in runSync would cost every eval a heap context, observed or not.
  #runSyncObserved(observed: EvalObservation, code: SourceCode, options: EvalOptions | undefined): EvalReport {
    if (!this.#queue.busy) this.#observed.running(observed); // else it is refused as BUSY
    return this.#observed.run(observed, () => this.#runSync(code, options));
  }

  #runSync(code: SourceCode, options: EvalOptions | undefined): EvalReport {
    const o = validateEvalOptions(code, options);
    if (o.signal?.aborted) return this.#report(stubOutcome(NativeStatus.Aborted), 0, o);
    const handle = this.#live();
    const broken = this.#brokenStatus();
    if (broken !== undefined) return this.#report(stubOutcome(broken), 0, o);
    // Evals run in call order: an inline eval cannot wait for queued async ones, so it refuses.
    if (this.#queue.busy) return this.#report(stubOutcome(NativeStatus.Busy), 0, o);
    this.#startClock(handle, o);
    const started = performance.now();
    requestEval(JobKind.Eval, handle.id, 0, o.timeoutMs ?? this.#options.executionTimeoutMs, o, false);
    const filename = o.filename ?? "<eval>";
    const raw = handle.evalSync?.(code, filename) ?? syncOutcome(native.evalSync(code, filename));
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
   * `code` may be its UTF-8 bytes ({@link SourceCode}), here as in every eval method.
   */
  eval(code: SourceCode, options?: EvalOptions): Promise<unknown> {
    // Not an async function: an eval answered at once then costs one promise, not a suspended frame too.
    try {
      return promisedValue(this.#start(code, options));
    } catch (err) {
      return Promise.reject(err);
    }
  }

  /** Like {@link Sandbox.eval}, but failures are returned as data with console and stats. */
  async run(code: SourceCode, options?: EvalOptions): Promise<EvalReport> {
    return this.#start(code, options);
  }

  /**
   * Like {@link Sandbox.run}, followed by the {@link Sandbox.snapshotAsync} of the state the eval
   * left when it was not stopped (it returned or threw; a budget, running out of memory, an abort
   * or a dispose may leave the state half-changed). The snapshot is written by the eval's own
   * executor job, right after the eval: one round trip instead of two, for a caller that keeps the
   * state after every eval. `snapshot` holds it, or `snapshotError` why it could not be taken
   * (over `maxSnapshotBytes`, say); neither is set when the eval was stopped or did not start.
   * Not with `inline`: the state would be walked on the Node main thread.
   */
  async runThenSnapshot(
    code: SourceCode,
    options?: EvalOptions,
    snapshotOptions?: SnapshotOptions,
  ): Promise<SnapshotAfterRun> {
    const after: SnapshotAfterEval = {
      options: resolveSnapshotOptions(snapshotOptions, this.#options.memoryLimitBytes),
    };
    if (options?.inline === true)
      throw invalid("runThenSnapshot cannot run inline: the snapshot would be written on the Node main thread");
    const report = await this.#start(code, options, after);
    if (after.written === undefined) return { report };
    try {
      const snapshot = sealWrittenSnapshot(after.written, after.options, native.engineVersion);
      return { report, snapshot: snapshot instanceof Promise ? await snapshot : snapshot };
    } catch (err) {
      return { report, snapshotError: err as SandboxError };
    }
  }

  // Starts an eval at once when nothing is queued or running, else behind the queue: its report,
  // or a promise of it when it did not end while evalAsync waited for it.
  #start(
    code: SourceCode,
    options: EvalOptions | undefined,
    after?: SnapshotAfterEval,
  ): EvalReport | Promise<EvalReport> {
    const o = validateEvalOptions(code, options);
    const observed = observeEval(this.#id, "eval", code, o.tenant, this.#options.onUsage);
    return observed === undefined ? this.#begin(code, o, after) : this.#beginObserved(observed, code, o, after);
  }

  // A method of its own, like #runSyncObserved.
  #beginObserved(
    observed: EvalObservation,
    code: SourceCode,
    o: EvalOptions,
    after: SnapshotAfterEval | undefined,
  ): EvalReport | Promise<EvalReport> {
    return this.#observed.run(observed, () => this.#begin(code, o, after, observed));
  }

  #begin(
    code: SourceCode,
    o: EvalOptions,
    after?: SnapshotAfterEval,
    observed?: EvalObservation,
  ): EvalReport | Promise<EvalReport> {
    if (this.#host.reentered()) return this.#report(stubOutcome(NativeStatus.Busy), 0, o);
    return this.#queue.start(code, o, after, observed);
  }

  #runNow(
    code: SourceCode,
    o: EvalOptions,
    after?: SnapshotAfterEval,
    observed?: EvalObservation,
  ): EvalReport | Promise<EvalReport> {
    if (observed !== undefined) this.#observed.running(observed);
    if (!this.#handle) return this.#report(stubOutcome(NativeStatus.Disposed), 0, o);
    const broken = this.#brokenStatus();
    if (broken !== undefined) return this.#report(stubOutcome(broken), 0, o);
    if (o.signal?.aborted) return this.#report(stubOutcome(NativeStatus.Aborted), 0, o);
    const handle = this.#handle;
    this.#startClock(handle, o);
    const evalId = ++this.#evalSeq;
    const started = performance.now();
    // Set before the eval starts: an inline eval makes its host calls inside evalAsync.
    this.#host.beginEval(evalId, o.onConsole);
    const budgetMs = o.timeoutMs ?? this.#options.executionTimeoutMs;
    const filename = o.filename ?? "<eval>";
    let pending: Promise<NativeOutcomeSlots> | AnsweredHere | NativeError;
    if (after === undefined) {
      requestEval(JobKind.Eval, handle.id, evalId, budgetMs, o, mayAnswerNow(started));
      pending = handle.start(code, filename);
    } else {
      // The snapshot written after the eval comes back in its outcome: such an eval is never answered at once.
      const excluded = this.#host.roots();
      requestEval(JobKind.EvalThenSnapshot, handle.id, evalId, budgetMs, o, false, maxSnapshotBody(after.options));
      pending = handle.start(code, filename, excluded);
    }
    if (isNativeError(pending)) {
      this.#host.endEval();
      const refused = pending.code === "BROKEN" ? NativeStatus.Broken : NativeStatus.Busy;
      return this.#report(stubOutcome(this.#brokenStatus() ?? refused), 0, o);
    }
    const wallMs = o.wallTimeoutMs ?? this.#options.wallTimeoutMs;
    if (pending instanceof Promise) return this.#outcomeOf(pending, evalId, started, o, wallMs, after);
    // It ended while evalAsync waited for it. Its value, maybe in the exchange buffer, is copied
    // out before any host code (an abort listener, a decode slice) can call into the addon.
    const raw = this.#checked(syncOutcome(pending));
    // Nothing it sent is still being decoded: no budget timer, no abort listener, no turn of the
    // event loop; decoded at once (decodeOutcome copies what it leaves for later).
    if (!this.#decodes.busy) {
      if (this.#host.callsInFlight) copyOutOfExchange(raw);
      this.#host.endEval(true);
      return this.#decoded(raw, started, o, wallMs);
    }
    copyOutOfExchange(raw);
    return this.#outcomeOf(raw, evalId, started, o, wallMs);
  }

  async #outcomeOf(
    pending: NativeOutcome | Promise<NativeOutcomeSlots>,
    evalId: number,
    started: number,
    o: EvalOptions,
    wallMs: number,
    after?: SnapshotAfterEval,
  ): Promise<EvalReport> {
    let raw: NativeOutcome;
    try {
      raw =
        pending instanceof Promise
          ? this.#checked(await settledWithin(pending, wallMs, o, (reason) => this.#stop(reason, evalId)))
          : this.#checked(pending);
      if (after !== undefined) after.written = raw.written;
      // Host calls and console lines the guest made before it ended reach the host while the eval is current.
      const drained = this.#decodes.drained();
      if (drained) await drained;
    } finally {
      this.#host.endEval(true);
    }
    return this.#decoded(raw, started, o, wallMs);
  }

  // The report of an ended eval, once its outcome's bytes are decoded (at once when they are few).
  #decoded(raw: NativeOutcome, started: number, o: EvalOptions, wallMs: number): EvalReport | Promise<EvalReport> {
    const ranMs = performance.now() - started;
    const decoding = decodeOutcome(raw, this.#decodes);
    if (!(decoding instanceof Promise)) return this.#report(raw, ranMs, o, wallMs, decoding);
    return this.#whenDecoded(decoding, raw, ranMs, o, wallMs);
  }

  // #decoded's closures, in a method of their own: there they would cost every eval a heap context.
  #whenDecoded(d: Promise<DecodedOutcome>, raw: NativeOutcome, ranMs: number, o: EvalOptions, wallMs: number) {
    return d.then(
      (decoded) => this.#report(raw, ranMs, o, wallMs, decoded),
      (err: unknown) => {
        // Disposed while the outcome was being decoded: answered as if disposed while running.
        if ((err as SandboxError).code !== "DISPOSED") throw err;
        return this.#report(stubOutcome(NativeStatus.Disposed), ranMs, o);
      },
    );
  }

  // A job the watchdog answered for (stuck in a built-in) leaves the sandbox broken.
  #checked(raw: NativeOutcome): NativeOutcome {
    if (raw.status === NativeStatus.Timeout && raw.message) this.#broken = true;
    return raw;
  }

  // Stops the async eval `evalId` for `reason` (a NativeStop), unless the sandbox was disposed.
  #stop(reason: number, evalId: number): void {
    if (this.#handle) stopEval(this.#handle, reason, evalId);
  }

  #brokenStatus(): NativeStatus | undefined {
    return this.#handle?.lost ? NativeStatus.WorkerLost : this.#broken ? NativeStatus.Broken : undefined;
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
    return traceOperation(
      "quickjs_native.snapshot",
      () => this.#snapshotNow(options),
      (bytes) => bytes.length,
    );
  }

  #snapshotNow(options: SnapshotOptions | undefined): Uint8Array {
    const resolved = resolveSnapshotOptions(options, this.#options.memoryLimitBytes);
    const handle = this.#live();
    if (this.#broken) throw new SandboxError("BROKEN", "a broken sandbox cannot be snapshotted");
    return takeSnapshot(handle, this.#host.roots(), resolved, native.engineVersion);
  }

  /**
   * Like {@link Sandbox.snapshot}, but the state is walked on an executor thread and the body
   * deflated on the libuv pool, so a large state never stalls the Node event loop. Waits for queued
   * evals, and evals queued after it wait for it.
   */
  async snapshotAsync(options?: SnapshotOptions): Promise<Uint8Array> {
    return traceOperation(
      "quickjs_native.snapshot",
      () => this.#snapshotOffThread(options),
      (bytes) => bytes.length,
    );
  }

  async #snapshotOffThread(options: SnapshotOptions | undefined): Promise<Uint8Array> {
    const resolved = resolveSnapshotOptions(options, this.#options.memoryLimitBytes);
    this.#live();
    if (this.#host.reentered()) throw new SandboxError("BUSY", "a host function cannot snapshot its own sandbox");
    return this.#queue.enqueue(async () => {
      const handle = this.#live();
      if (this.#broken) throw new SandboxError("BROKEN", "a broken sandbox cannot be snapshotted");
      const evalId = ++this.#evalSeq;
      const excluded = this.#host.roots();
      requestSnapshot(JobKind.WriteSnapshot, evalId, 0, maxSnapshotBody(resolved));
      const pending = handle.start(excluded);
      if (isNativeError(pending)) throw refusal(pending, "take a snapshot", "cannot take a snapshot");
      const { status, written, message, stop } = outcomeOf(await pending);
      if (status !== NativeStatus.Ok || !written)
        throw errorOf(status, undefined, message, stop, limitsOf(this.#options, {}));
      return sealWrittenSnapshot(written, resolved, native.engineVersion);
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
    return traceOperation(
      "quickjs_native.restore",
      () => Sandbox.#restoreNow(bytes, options),
      () => bytes.length,
    );
  }

  static #restoreNow(bytes: Uint8Array, options: RestoreOptions | undefined): RestoredSandbox {
    const { sandbox, body, budgetMs } = Sandbox.#opened(bytes, options);
    try {
      return { sandbox, notRestored: restoreBody(sandbox.#live(), body, budgetMs) };
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
    return traceOperation(
      "quickjs_native.restore",
      () => Sandbox.#restoreInto(bytes, options),
      () => bytes.length,
    );
  }

  static async #restoreInto(bytes: Uint8Array, options: RestoreOptions | undefined): Promise<RestoredSandbox> {
    const { sandbox, body, budgetMs } = Sandbox.#opened(bytes, options);
    try {
      return { sandbox, notRestored: await sandbox.#restoreOffThread(body, budgetMs) };
    } catch (err) {
      sandbox.dispose();
      throw err;
    }
  }

  // The envelope is checked before a runtime exists (refusals cost no sandbox), then the sandbox
  // the body is to be read into is created.
  static #opened(
    bytes: Uint8Array,
    options: RestoreOptions | undefined,
  ): { sandbox: Sandbox; body: Buffer; budgetMs: number } {
    const split = splitRestoreOptions(options);
    const sandboxOptions = validateOptions(split.sandbox);
    const body = openSnapshot(bytes, resolveSnapshotOptions(split.snapshot, sandboxOptions.memoryLimitBytes));
    const sandbox = new Sandbox(split.sandbox);
    return { sandbox, body, budgetMs: split.restoreTimeoutMs ?? sandbox.#options.executionTimeoutMs };
  }

  async #restoreOffThread(body: Buffer, budgetMs: number): Promise<NotRestored[]> {
    const handle = this.#live();
    const evalId = ++this.#evalSeq;
    requestSnapshot(JobKind.ReadSnapshot, evalId, budgetMs, 0);
    const pending = handle.start(body);
    if (isNativeError(pending)) throw refusal(pending, "restore into a sandbox", "cannot restore");
    const wallMs = this.#options.wallTimeoutMs;
    const settled = await settledWithin(pending, wallMs, {}, (reason) => this.#stop(reason, evalId));
    const { status, read, message, stop } = this.#checked(settled);
    if (status !== NativeStatus.Ok || !read)
      throw errorOf(status, undefined, message, stop, limitsOf(this.#options, { timeoutMs: budgetMs }, wallMs));
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
    sandboxClosed(this.#id);
    // One error for every call and decode it fails, made only if one does: an error captures a
    // stack, and two of them were 8% of creating and disposing a sandbox.
    let error: SandboxError | undefined;
    const disposed = (): SandboxError => (error ??= new SandboxError("DISPOSED", "the sandbox was disposed"));
    this.#host.abortPending(disposed);
    this.#decodes.cancel(disposed);
    handle.dispose();
  }

  /** Same as {@link Sandbox.dispose}, for `using`. */
  [Symbol.dispose](): void {
    this.dispose();
  }
}
