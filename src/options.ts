/**
 * Every default and bound of the engine, defined once. The validators (src/validate.ts,
 * src/sandbox.ts), the CLI help and the middleware's option schema all take their numbers from
 * here, so changing one changes every place it shows. The middleware's own defaults and bounds
 * live in src/langchain/ (options.ts, limits.ts).
 */
import type { SandboxClock, SandboxIsolation } from "./types.js";

const KiB = 1024;
const MiB = 1024 * KiB;
const GiB = 1024 * MiB;

/** The longest timer Node.js can arm, ms: every time budget is at most this. */
const MAX_TIMER_MS = 2 ** 31 - 1;

/** Defaults of {@link SandboxOptions} (`randomSeed`: a fresh CSPRNG seed; `copyLimitBytes`: `memoryLimitBytes`). */
export const SANDBOX_DEFAULTS = Object.freeze({
  /** Cap on everything the guest allocates, ArrayBuffers included: 64 MiB. */
  memoryLimitBytes: 64 * MiB,
  /** Cap on the guest's native stack: 1 MiB. */
  maxStackSizeBytes: 1 * MiB,
  /** Guest execution (CPU) time per eval: 5 s. */
  executionTimeoutMs: 5000,
  /** Wall-clock time per eval, host waits included: 60 s. */
  wallTimeoutMs: 60_000,
  /** Console output is captured. */
  captureConsole: true,
  /** Console text kept per eval: 1 MiB. */
  maxConsoleBytes: 1 * MiB,
  /** Async host calls one eval may have in flight (made and not yet settled): 10,000. */
  maxHostCallsInFlight: 10_000,
  /** `Date` reads the time the eval started, constant while it runs. */
  clock: "frozen" as SandboxClock,
  /** The runtime lives in this process. */
  isolation: "in-process" as SandboxIsolation,
  /** A helper process that cannot be confined is refused. */
  allowUnconfined: false,
  /** Every process-tier sandbox is in the same partition. */
  partition: "",
  /** `renderValue`'s budget when none is given, characters (the eval tool's default reply size). */
  renderChars: 4000,
});

/** Bounds the engine accepts for {@link SandboxOptions} and eval options (inclusive). */
export const SANDBOX_LIMITS = Object.freeze({
  /** Length of a process-tier partition key (a tenant id). */
  maxPartitionChars: 256,
  memoryLimitBytes: Object.freeze({ min: 1 * MiB, max: 16 * GiB }),
  copyLimitBytes: Object.freeze({ min: 1 * KiB, max: 16 * GiB }),
  /** The upper bound is also capped at half an executor thread's stack, whichever is lower. */
  maxStackSizeBytes: Object.freeze({ min: 64 * KiB, max: 8 * MiB }),
  /** Every time budget (execution, wall, restore) is a number of ms above 0 and at most this. */
  maxTimeoutMs: MAX_TIMER_MS,
  maxConsoleBytes: Object.freeze({ min: 0, max: 256 * MiB }),
  maxHostCallsInFlight: Object.freeze({ min: 1, max: 1_000_000 }),
  /** `Date.now()` must stay inside the `Date` range: a clock reads at most this far from 0, ms. */
  maxClockMs: 8.64e15,
  /** Longest eval `filename`, characters. */
  maxFilenameChars: 1024,
  /** Longest name `getGlobal` reads, characters. */
  maxGlobalNameChars: 1024,
  /** Longest name or dotted path of a host function, characters. */
  maxFunctionPathChars: 256,
  /** `globalNames()` lists at most this many names unless asked for another count. */
  globalNames: 10_000,
});
