/**
 * The pool of helper processes: which helper a new process-tier sandbox goes to. Sandboxes share
 * a helper only when they carry the same partition, so one tenant's compromised helper never holds
 * another tenant's data; a helper that hosted a partition never serves another, even once empty.
 * `min` helpers wait warm (spawned and confined, no partition yet), so a new sandbox costs one
 * round trip to a helper that is already running.
 */
import { SandboxError } from "../errors.js";
import type { NativeDispatcher } from "../native.js";
import type { ResolvedSandboxOptions } from "../types.js";
import { checkInteger, invalid } from "../validate.js";
import { HelperProcess, helperPath } from "./helper-process.js";
import type { RemoteHandle } from "./remote-handle.js";

/** How many helper processes run and how full each gets. */
export interface ProcessPoolOptions {
  /** Helpers kept warm (spawned, confined, hosting nothing yet) once the process tier is in use. Default 1. */
  min?: number;
  /** Helpers alive at most; past it the oldest empty helper is ended, else a new sandbox fails with `BUSY`. Default 64. */
  max?: number;
  /** Sandboxes one helper hosts at most (of one partition). Default 64. */
  sandboxesPerProcess?: number;
  /**
   * How long a call that waits for its helper (`evalSync`, a snapshot, a setup call) waits beyond
   * the eval's own budget before the helper is killed as unresponsive and its sandboxes are lost
   * (`WORKER_LOST`). Default 30,000 ms.
   */
  replyGraceMs?: number;
}

/** Defaults of {@link ProcessPoolOptions}. */
export const PROCESS_POOL_DEFAULTS: Readonly<Required<ProcessPoolOptions>> = Object.freeze({
  min: 1,
  max: 64,
  sandboxesPerProcess: 64,
  replyGraceMs: 30_000,
});

/** Heap limit a warm helper's address-space cap is sized for, per sandbox (the default memoryLimitBytes). */
const WARM_MEMORY_PER_SANDBOX = 64 * 1024 ** 2;

class HelperPool {
  #config: Required<ProcessPoolOptions> = { ...PROCESS_POOL_DEFAULTS };
  readonly #warm: HelperProcess[] = [];
  readonly #byPartition = new Map<string, HelperProcess[]>();
  readonly #empty: HelperProcess[] = []; // assigned to a partition, hosting nothing now: oldest first
  #alive = 0;
  #inUse = false; // a process-tier sandbox was placed: keep `min` warm from now on
  #refill: NodeJS.Immediate | undefined;
  // Helper executables whose confined helpers exited because they could not confine themselves.
  readonly #cannotConfine = new Set<string>();

  configure(options: ProcessPoolOptions): Readonly<Required<ProcessPoolOptions>> {
    if (typeof options !== "object" || options === null) throw invalid("processPool options must be an object");
    for (const key of Object.keys(options))
      if (!(key in PROCESS_POOL_DEFAULTS))
        throw invalid(
          `unknown processPool option '${key}'; known options: ${Object.keys(PROCESS_POOL_DEFAULTS).join(", ")}`,
        );
    const next = { ...this.#config, ...options };
    checkInteger("processPool.max", next.max, 1, 4096);
    checkInteger("processPool.min", next.min, 0, next.max);
    checkInteger("processPool.sandboxesPerProcess", next.sandboxesPerProcess, 1, 4096);
    checkInteger("processPool.replyGraceMs", next.replyGraceMs, 100, 3_600_000);
    this.#config = next;
    while (this.#warm.length > next.min) this.#end(this.#warm.pop()!);
    this.#refillSoon();
    return Object.freeze({ ...next });
  }

  get replyGraceMs(): number {
    return this.#config.replyGraceMs;
  }

  place(options: ResolvedSandboxOptions, dispatch: NativeDispatcher): RemoteHandle {
    const linux = process.platform === "linux";
    if (!linux && !options.allowUnconfined)
      throw new SandboxError(
        "INVALID_ARGUMENT",
        `isolation: "process" cannot confine its helper on ${process.platform}; pass allowUnconfined: true to run it unconfined`,
      );
    // On Linux a sandbox gets a confined helper, unless its helper executable is known not to
    // confine itself here and the sandbox allows an unconfined one.
    const confined = linux && !(options.allowUnconfined && this.#cannotConfine.has(helperPath()));
    this.#inUse = true;
    const { partition, memoryLimitBytes } = options;
    const helpers = this.#byPartition.get(partition) ?? [];
    let helper = helpers.find(
      (h) =>
        !h.lost &&
        (h.confined || !confined) &&
        h.size < this.#config.sandboxesPerProcess &&
        h.memoryPerSandbox >= memoryLimitBytes,
    );
    if (helper === undefined) {
      helper = this.#takeWarm(memoryLimitBytes, confined) ?? this.#spawn(memoryLimitBytes, confined);
      helper.partition = partition;
      helpers.push(helper);
      this.#byPartition.set(partition, helpers);
    }
    const at = this.#empty.indexOf(helper);
    if (at >= 0) this.#empty.splice(at, 1);
    this.#refillSoon();
    try {
      return helper.open(options, dispatch);
    } catch (err) {
      // A helper that died before its loss was reported (a warm one, an idle one): once more, in a new one.
      if ((err as SandboxError).code !== "WORKER_LOST" || helper.size > 0) throw err;
      this.#forget(helper);
      let again = confined;
      if (helper.couldNotConfine) {
        // Not a passing failure: every confined helper of this executable would exit the same way.
        this.#learnCannotConfine(helper);
        if (!options.allowUnconfined)
          throw new SandboxError(
            "WORKER_LOST",
            `${helper.lostMessage()} (a kernel without seccomp, or an emulator such as qemu-user); allowUnconfined: true runs it unconfined instead`,
            { cause: err },
          );
        again = false;
      }
      const fresh = this.#spawn(memoryLimitBytes, again);
      fresh.partition = partition;
      helpers.push(fresh);
      this.#byPartition.set(partition, helpers);
      return fresh.open(options, dispatch);
    }
  }

  // A confined helper of this executable exited for want of confinement (seccomp refused, say):
  // no more are kept warm, and sandboxes that allow it get unconfined helpers from now on.
  #learnCannotConfine(helper: HelperProcess): void {
    if (this.#cannotConfine.has(helper.path)) return;
    this.#cannotConfine.add(helper.path);
    process.emitWarning(
      `the process tier's helper (${helper.path}) could not confine itself: from now on, process-tier sandboxes created with allowUnconfined: true run in unconfined helpers, and the others fail with WORKER_LOST`,
      { code: "QUICKJS_NATIVE_UNCONFINED" },
    );
  }

  #takeWarm(memoryLimitBytes: number, confined: boolean): HelperProcess | undefined {
    if (!confined || memoryLimitBytes > WARM_MEMORY_PER_SANDBOX) return undefined;
    let helper = this.#warm.shift();
    while (helper?.lost) helper = this.#warm.shift();
    return helper;
  }

  #spawn(memoryLimitBytes: number, confined: boolean): HelperProcess {
    if (this.#alive >= this.#config.max) {
      const idle = this.#warm.shift() ?? this.#empty.shift();
      if (idle === undefined)
        throw new SandboxError(
          "BUSY",
          `the process pool is full: ${this.#config.max} helper processes (processPool.max) host sandboxes`,
        );
      this.#end(idle);
    }
    const helper = new HelperProcess(
      Math.max(memoryLimitBytes, WARM_MEMORY_PER_SANDBOX),
      this.#config.sandboxesPerProcess,
      confined,
      (h) => this.#emptied(h),
      (h) => this.#lost(h),
    );
    this.#alive++;
    return helper;
  }

  // Keeps `min` helpers warm, spawned after the current turn (a spawn costs about a millisecond).
  #refillSoon(): void {
    if (!this.#inUse || this.#refill !== undefined || process.platform !== "linux") return;
    if (this.#cannotConfine.has(helperPath())) return; // warm helpers are confined ones
    this.#refill = setImmediate(() => {
      this.#refill = undefined;
      try {
        while (this.#warm.length < this.#config.min && this.#alive < this.#config.max)
          this.#warm.push(this.#spawn(WARM_MEMORY_PER_SANDBOX, true));
      } catch {
        // A helper that cannot be spawned now is spawned on demand, where the caller sees why.
      }
    });
    this.#refill.unref();
  }

  #emptied(helper: HelperProcess): void {
    if (helper.lost || this.#empty.includes(helper)) return;
    this.#empty.push(helper);
  }

  #lost(helper: HelperProcess): void {
    if (helper.couldNotConfine) this.#learnCannotConfine(helper);
    this.#forget(helper);
    this.#alive--;
    this.#refillSoon();
  }

  #end(helper: HelperProcess): void {
    this.#forget(helper);
    helper.close(); // its loss is reported to #lost, which counts it out
  }

  #forget(helper: HelperProcess): void {
    for (const list of [this.#warm, this.#empty]) {
      const at = list.indexOf(helper);
      if (at >= 0) list.splice(at, 1);
    }
    if (helper.partition === undefined) return;
    const helpers = this.#byPartition.get(helper.partition);
    const at = helpers?.indexOf(helper) ?? -1;
    if (at >= 0) helpers!.splice(at, 1);
    if (helpers?.length === 0) this.#byPartition.delete(helper.partition);
  }
}

const pool = new HelperPool();

/** @internal A process-tier handle for a sandbox with `options`, placed in a helper of its partition. */
export function createRemoteHandle(options: ResolvedSandboxOptions, dispatch: NativeDispatcher): RemoteHandle {
  return pool.place(options, dispatch);
}

/** @internal How long a direct call waits for a helper beyond the eval's budget (ProcessPoolOptions.replyGraceMs). */
export function replyGraceMs(): number {
  return pool.replyGraceMs;
}

/**
 * Sets how many helper processes the process tier keeps warm and runs at most, how many
 * sandboxes share one (of one partition), and how long a helper may take to answer beyond an
 * eval's budget. Returns the settings in force. Throws `INVALID_ARGUMENT`.
 */
export function configureProcessPool(options: ProcessPoolOptions): Readonly<Required<ProcessPoolOptions>> {
  return pool.configure(options);
}
