import type { WallHold } from "./wall-hold.js";

/**
 * Public types of the engine API. Everything here is plain data: no native object ever
 * reaches a caller or guest code.
 */
import type { UsageRecord } from "./telemetry/usage.js";

/**
 * Options of a {@link Sandbox}. Every limit applies to this sandbox alone. The defaults and
 * accepted ranges are exported as `SANDBOX_DEFAULTS` and `SANDBOX_LIMITS` (src/options.ts).
 */
export interface SandboxOptions {
  /** Hard cap on everything the guest allocates, ArrayBuffers included. Default 64 MiB. */
  memoryLimitBytes?: number;
  /** Cap on the guest's native stack use (deep recursion becomes a guest `RangeError`). Default 1 MiB. */
  maxStackSizeBytes?: number;
  /**
   * Budget of guest execution time per eval, in ms: the CPU time of the thread running the guest,
   * so neither waiting on host calls nor waiting for a core (other sandboxes' guests run
   * time-sliced on the addon's executor threads, at most 64 unless `QJSN_EXECUTOR_THREADS` says
   * otherwise) is counted. Default 5000.
   */
  executionTimeoutMs?: number;
  /** Budget of wall-clock time per eval (execution plus host waits), in ms. Default 60000. */
  wallTimeoutMs?: number;
  /** Keep `console.*` output of each eval. When false, `console` still exists and output is discarded. Default true. */
  captureConsole?: boolean;
  /** Cap on the console text kept per eval, in UTF-8 bytes of the formatted lines; past it `consoleTruncated` is set. Default 1 MiB. */
  maxConsoleBytes?: number;
  /**
   * Cap on the bytes one eval hands to the host, all copies together: the result, console
   * arguments, the thrown value and every host-call argument (awaited or not). A string the guest
   * references N times counts N times, since the host receives N copies. Checked before the host
   * allocates: past it the eval fails with `COPY_LIMIT` (console output is cut instead, with
   * `consoleTruncated`). Default: `memoryLimitBytes`.
   */
  copyLimitBytes?: number;
  /**
   * Cap on the async host calls one eval has in flight (made, not yet settled): past it the eval
   * fails with `HOST_CALL_LIMIT`. Each call in flight also counts 1 KiB of host-side state against
   * `copyLimitBytes` while it lasts. Default 10,000 (a `Promise.all` over a few thousand calls fits).
   */
  maxHostCallsInFlight?: number;
  /**
   * What `Date.now()` and `new Date()` return inside the sandbox. Default `"frozen"`.
   * See {@link SandboxClock}.
   */
  clock?: SandboxClock;
  /**
   * Seed of `Math.random`: two sandboxes with the same seed produce the same sequence. An integer
   * from 0 to 2^53 − 1. Default: a fresh seed from the host's cryptographic generator (never derived
   * from the clock); the seed in force is readable in {@link Sandbox.options}.
   */
  randomSeed?: number;
  /**
   * Receives one {@link UsageRecord} per eval (billing, quotas): the counters its report shows, its
   * host calls by name and the bytes copied, attributed to the eval's `tenant`. Called after the
   * eval's caller has its answer (a batch per turn of the event loop); what it throws is reported
   * once as a process warning. Default: none.
   */
  onUsage?: (record: UsageRecord) => void;
  /**
   * Where the sandbox's QuickJS runtime lives. `"in-process"` (the default): in this process, an
   * eval costs microseconds, and a memory-safety bug in the engine is a bug in this process.
   * `"process"`: in a confined helper process (Linux: seccomp-bpf allowlist, no new privileges,
   * resource limits, death with its parent), with the same API; a helper that dies fails the evals
   * of its sandboxes with `WORKER_LOST` and leaves them broken, and nothing else. Refused where the
   * helper cannot be confined, unless `allowUnconfined` is set.
   */
  isolation?: SandboxIsolation;
  /**
   * With `isolation: "process"`: accept a helper that is not confined. Off Linux (no confinement
   * there yet) the sandbox is refused without it. On Linux a helper that cannot confine itself (a
   * kernel without seccomp, or an emulator such as qemu-user, which refuses seccomp filters) exits
   * before serving: without this option the sandbox fails with `WORKER_LOST` naming the
   * confinement; with it, the sandbox runs in an unconfined helper instead. The first such failure
   * is learned for the process (a warning with code `QUICKJS_NATIVE_UNCONFINED` says so): sandboxes
   * with this option then get unconfined helpers at once, while those without it never share one.
   * Default false.
   */
  allowUnconfined?: boolean;
  /**
   * With `isolation: "process"`: sandboxes share a helper process only when they carry the same
   * partition (a tenant id, say), so one tenant's compromised helper never holds another's data.
   * Default `""`.
   */
  partition?: string;
}

/** Where a sandbox's runtime lives: see {@link SandboxOptions.isolation}. */
export type SandboxIsolation = "in-process" | "process";

/** {@link SandboxOptions} with every default filled in (`onUsage` stays optional). */
export type ResolvedSandboxOptions = Required<Omit<SandboxOptions, "onUsage">> & Pick<SandboxOptions, "onUsage">;

/**
 * The guest's clock.
 * - `"frozen"`: the host time at the start of each eval, constant while it runs (guest code can
 *   neither time itself nor observe host timing). Local time is UTC.
 * - `"real"`: the host's system clock, read on every call, in the host's time zone.
 * - `{ now() }`: the host function is called once at the start of each eval and its value (ms since
 *   the epoch) is frozen for that eval. It is not called per `Date.now()`: guest code runs off the
 *   main thread, where host code cannot be called synchronously without blocking it. Local time is UTC.
 */
export type SandboxClock = "real" | "frozen" | { now(): number };

/**
 * The code of one eval: a string, or its UTF-8 bytes (copied as they are; invalid UTF-8 is a
 * `SyntaxError` of the guest's). A caller that already holds the bytes, as from a worker thread or
 * a file, saves the calling thread measuring and converting a long string.
 */
export type SourceCode = string | Uint8Array;

/** Options of one eval. */
export interface EvalOptions {
  /** Overrides the sandbox's `executionTimeoutMs` for this eval. */
  timeoutMs?: number;
  /** Overrides the sandbox's `wallTimeoutMs` for this eval (async `eval`/`run` only). */
  wallTimeoutMs?: number;
  /** Name shown in guest stack traces. Default `"<eval>"`. */
  filename?: string;
  /** Aborts the eval: it rejects with `ABORTED`, guest code is interrupted and pending host calls' signals fire. */
  signal?: AbortSignal;
  /** Suspends the wall budget while held (async `eval`/`run` only); see {@link WallHold}. */
  wallHold?: WallHold;
  /**
   * What to do with values that cannot be copied (functions, symbols, accessors, Proxies, promises...).
   * `"throw"` (default) fails the eval with `UNSERIALIZABLE`; `"describe"` replaces each with a
   * {@link GuestOpaque} placeholder, for display.
   */
  unserializable?: "throw" | "describe";
  /**
   * Called on the main thread with each console line while the eval runs (async `eval`/`run`
   * only), for live progress. The lines are also in the report as usual. Errors it throws are
   * ignored.
   */
  onConsole?: (entry: ConsoleEntry) => void;
  /**
   * Pins the guest clock for this eval to this time (ms since the epoch), whatever the sandbox's
   * `clock`; local time is then UTC. With `randomSeed`, it lets an eval be run again exactly.
   */
  clockMs?: number;
  /** Reseeds `Math.random` before this eval (an integer 0..2^53 − 1); later evals continue that sequence. */
  randomSeed?: number;
  /**
   * Runs this async `eval`/`run` on the calling thread instead of an executor thread: an awaited
   * host function that answers at once resumes the guest without a thread hand-over (a few
   * microseconds instead of tens), and a trivial eval skips two. The Node event loop is blocked
   * while guest code runs (up to the execution budget, and the watchdog does not cover it), so it
   * is for trusted, short evals. The arguments of its synchronous host calls are decoded in one go
   * (the guest waits on this thread); its result, console output and async host-call arguments are
   * decoded a slice at a time, as for any `eval`. Default false.
   */
  inline?: boolean;
  /**
   * For a caller that only shows the result (or thrown value), as `renderValue(value, displayChars)`
   * does: the engine copies, on its own thread, only the head of the value such a rendering can
   * show (about `displayChars / 2` values and keys, depth first); each object, array, Map or Set cut
   * short keeps its count, and the copy renders to the same text as the exact copy (`... N more
   * keys` included). A guest object of 300,000 keys then never reaches the Node main thread, which
   * would spend tens of milliseconds decoding it. Default: unset, the value is an exact copy.
   */
  displayChars?: number;
  /**
   * Who this eval is billed to (an account, a thread): its usage record's `tenant`, and, hashed, its
   * span's `quickjs_native.tenant.hash` attribute. At most 1024 characters. Default: none.
   */
  tenant?: string;
}

/** Console levels the guest can write to. */
export type ConsoleLevel = "log" | "info" | "warn" | "error" | "debug";

/** One `console.*` call of the guest, formatted like Node's `console`. */
export interface ConsoleEntry {
  level: ConsoleLevel;
  text: string;
}

/** Measurements of one eval. */
export interface EvalStats {
  /** Guest execution time, ms: the guest's CPU time (host waits and waits for a core excluded), also when a budget stopped it. */
  executionMs: number;
  /** Wall-clock time from start to settle, ms. */
  wallMs: number;
  /** Host function calls the guest made (sync and async). */
  hostCalls: number;
  /** Bytes allocated by the guest runtime when the eval ended. */
  memoryUsedBytes: number;
  /** Highest allocation of the guest runtime during the eval. */
  peakMemoryBytes: number;
}

/** Everything one eval produced. Guest failures are data here; `eval`/`evalSync` throw them instead. */
export type EvalReport<T = unknown> =
  | { ok: true; value: T; console: ConsoleEntry[]; consoleTruncated: boolean; stats: EvalStats }
  | {
      ok: false;
      error: import("./errors.js").SandboxError;
      console: ConsoleEntry[];
      consoleTruncated: boolean;
      stats: EvalStats;
    };

/** Memory of a sandbox's runtime. */
export interface MemoryUsage {
  usedBytes: number;
  peakBytes: number;
  limitBytes: number;
}

/** Context handed to an async host function. */
export interface HostCallContext {
  /** Fires when the eval that made the call ends (timeout, abort, dispose) before the call settles. */
  signal: AbortSignal;
}

/** A synchronous host function: copied arguments in, copied result out. */
export type HostFunction = (...args: unknown[]) => unknown;

/** An asynchronous host function: the guest gets a promise at once; the result settles it. */
export type AsyncHostFunction = (args: unknown[], context: HostCallContext) => unknown;

/** What a {@link GuestOpaque} stands for. */
export type GuestOpaqueKind = "function" | "symbol" | "accessor" | "proxy" | "promise" | "weak collection" | "object";

/** A global (or a part of one, `name.key`) that came back as a placeholder which throws when read. */
export interface NotRestored {
  /** The global's name, or the path to the part that was lost (`state.timer`, `list[3]`). */
  name: string;
  /**
   * What it was: `closure`, `Promise`, `Proxy`, `WeakMap`, `Generator`, `symbol`, `native function`,
   * `instance with private fields`, `accessor (closure)`...
   */
  type: string;
}
