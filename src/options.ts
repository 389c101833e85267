/**
 * Every default and bound of the engine and of the code-interpreter middleware, defined once.
 * The validators (src/sandbox.ts, src/langchain/options.ts), the CLI help and the prompt text the
 * model reads all take their numbers from here, so changing one changes every place it shows.
 */
import type { SandboxClock } from "./types.js";

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
});

/** Bounds the engine accepts for {@link SandboxOptions} and eval options (inclusive). */
export const SANDBOX_LIMITS = Object.freeze({
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

/** Defaults of the code-interpreter middleware's options (`createCodeInterpreterMiddleware`). */
export const INTERPRETER_DEFAULTS = Object.freeze({
  memoryLimitBytes: SANDBOX_DEFAULTS.memoryLimitBytes,
  executionTimeoutMs: SANDBOX_DEFAULTS.executionTimeoutMs,
  /** Wall-clock budget per eval, or `executionTimeoutMs` when that is larger. */
  wallTimeoutMs: SANDBOX_DEFAULTS.wallTimeoutMs,
  /** Name of the tool the model calls. */
  toolName: "eval",
  captureConsole: SANDBOX_DEFAULTS.captureConsole,
  /** The whole text the model reads per eval, characters. */
  maxResultChars: 4000,
  /** The model-written `code` argument of one eval, UTF-8 bytes: 256 KiB. */
  maxCodeBytes: 256 * KiB,
  /** Full texts of cut outputs kept per thread, characters. */
  maxKeptOutputChars: 1_000_000,
  /** Programmatic tool calls per eval over all tools. */
  maxPtcCalls: 256,
  /** Install the `task()` global when the agent has deepagents' `task` tool. */
  subagents: true,
  /** Wall-clock budget of each subagent: 10 min. */
  subagentTimeoutMs: 600_000,
  /** Interpreter state lives across the agent runs of a thread. */
  mode: "thread" as "thread" | "turn" | "call",
  clock: SANDBOX_DEFAULTS.clock,
  /** Interpreter sessions alive at once. */
  maxLiveSessions: 64,
  /** An idle session is closed after 30 min. */
  sessionIdleTimeoutMs: 30 * 60 * 1000,
});

/** Bounds of the code-interpreter middleware's options and of what guest code may ask of it. */
export const INTERPRETER_LIMITS = Object.freeze({
  /**
   * Least `maxResultChars`: room for every section of a reply (notice, console, error, hint,
   * status) with a head, a tail and a marker in each. The five section tags alone take 97.
   */
  minResultChars: 300,
  maxCodeBytes: Object.freeze({ min: 1 * KiB, max: 64 * MiB }),
  /** Least `maxSnapshotBytes`. */
  minSnapshotBytes: 1 * KiB,
  /** Least length of `snapshotSigningKey`, bytes. */
  minSigningKeyBytes: 16,
  /** Least `sessionIdleTimeoutMs`. */
  minSessionIdleTimeoutMs: 1000,
  /** `task()` calls in flight per session; more wait in a queue. */
  subagentsInFlight: 32,
  /** `task()` calls waiting per session; one more rejects (host memory, not the guest's, holds the queue). */
  subagentsQueued: 4096,
  /** A `task()` `responseSchema`: serialized size, nesting depth, properties per object. */
  responseSchema: Object.freeze({ maxBytes: 4096, maxDepth: 5, maxProperties: 32 }),
});
