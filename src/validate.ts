/**
 * Argument validation of the engine API: sandbox options, eval options, global names and paths.
 * Every refusal is an `INVALID_ARGUMENT` {@link SandboxError} that says what was expected.
 */
import { randomInt } from "node:crypto";
import { formatWithOptions } from "node:util";
import { SandboxError } from "./errors.js";
import { native } from "./native.js";
import { SANDBOX_DEFAULTS, SANDBOX_LIMITS } from "./options.js";
import { MAX_TENANT_CHARS } from "./telemetry/hub.js";
import type { EvalOptions, ResolvedSandboxOptions, SandboxClock, SandboxOptions } from "./types.js";
import { WallHold } from "./wall-hold.js";

const DEFAULTS: Required<Omit<SandboxOptions, "randomSeed" | "copyLimitBytes" | "onUsage">> = SANDBOX_DEFAULTS;
const OPTION_KEYS = [...Object.keys(DEFAULTS), "randomSeed", "copyLimitBytes", "onUsage"];
const MAX_TIME_MS = SANDBOX_LIMITS.maxClockMs;
const MAX_TIMEOUT_MS = SANDBOX_LIMITS.maxTimeoutMs;
const PATH_SEGMENT = /^[A-Za-z_$][\w$]*$/;
const FORBIDDEN_SEGMENTS = new Set(["__proto__", "prototype", "constructor"]);

export function invalid(message: string): SandboxError {
  return new SandboxError("INVALID_ARGUMENT", message);
}

export function checkInteger(name: string, value: unknown, min: number, max: number): number {
  if (typeof value !== "number" || !Number.isInteger(value) || value < min || value > max) {
    throw invalid(
      `${name} must be an integer between ${min} and ${max}; got ${formatWithOptions({ depth: 0 }, "%O", value)}`,
    );
  }
  return value;
}

function checkTimeout(name: string, value: unknown): number {
  if (typeof value !== "number" || !(value > 0) || value > MAX_TIMEOUT_MS) {
    throw invalid(
      `${name} must be a number of milliseconds between 0 (exclusive) and ${MAX_TIMEOUT_MS}; got ${formatWithOptions({ depth: 0 }, "%O", value)}`,
    );
  }
  return value;
}

function checkKeys(what: string, value: object, allowed: readonly string[]): void {
  for (const key of Object.keys(value)) {
    if (!allowed.includes(key)) throw invalid(`unknown ${what} option '${key}'; known options: ${allowed.join(", ")}`);
  }
}

export function validateOptions(options: unknown): ResolvedSandboxOptions {
  if (options === undefined) return validateOptions({});
  if (typeof options !== "object" || options === null) throw invalid("Sandbox options must be an object");
  checkKeys("Sandbox", options, OPTION_KEYS);
  const o = { ...DEFAULTS, randomSeed: 0, copyLimitBytes: 0, ...(options as SandboxOptions) };
  const { memoryLimitBytes, copyLimitBytes, maxStackSizeBytes, maxConsoleBytes, maxHostCallsInFlight } = SANDBOX_LIMITS;
  checkInteger("memoryLimitBytes", o.memoryLimitBytes, memoryLimitBytes.min, memoryLimitBytes.max);
  if ((options as SandboxOptions).copyLimitBytes === undefined) o.copyLimitBytes = o.memoryLimitBytes;
  else checkInteger("copyLimitBytes", o.copyLimitBytes, copyLimitBytes.min, copyLimitBytes.max);
  // Executor threads have native.threadStackBytes of stack; keep a wide margin for C frames.
  checkInteger(
    "maxStackSizeBytes",
    o.maxStackSizeBytes,
    maxStackSizeBytes.min,
    Math.min(maxStackSizeBytes.max, native.threadStackBytes / 2),
  );
  checkTimeout("executionTimeoutMs", o.executionTimeoutMs);
  checkTimeout("wallTimeoutMs", o.wallTimeoutMs);
  if (typeof o.captureConsole !== "boolean") throw invalid("captureConsole must be a boolean");
  checkInteger("maxConsoleBytes", o.maxConsoleBytes, maxConsoleBytes.min, maxConsoleBytes.max);
  checkInteger("maxHostCallsInFlight", o.maxHostCallsInFlight, maxHostCallsInFlight.min, maxHostCallsInFlight.max);
  checkClock(o.clock);
  if (o.isolation !== "in-process" && o.isolation !== "process")
    throw invalid(
      `isolation must be "in-process" or "process"; got ${formatWithOptions({ depth: 0 }, "%O", o.isolation)}`,
    );
  if (typeof o.allowUnconfined !== "boolean") throw invalid("allowUnconfined must be a boolean");
  if (typeof o.partition !== "string" || o.partition.length > SANDBOX_LIMITS.maxPartitionChars)
    throw invalid(`partition must be a string of at most ${SANDBOX_LIMITS.maxPartitionChars} characters`);
  if (o.onUsage !== undefined && typeof o.onUsage !== "function") throw invalid("onUsage must be a function");
  // A fresh seed comes from the CSPRNG: upstream seeds from the time, which leaks the host clock.
  if ((options as SandboxOptions).randomSeed === undefined) o.randomSeed = randomInt(2 ** 48 - 1);
  else checkInteger("randomSeed", o.randomSeed, 0, Number.MAX_SAFE_INTEGER);
  return o;
}

function checkClock(clock: unknown): asserts clock is SandboxClock {
  if (clock === "real" || clock === "frozen") return;
  if (typeof clock === "object" && clock !== null && typeof (clock as { now?: unknown }).now === "function") return;
  throw invalid(
    `clock must be "real", "frozen" or an object with a now() method; got ${formatWithOptions({ depth: 0 }, "%O", clock)}`,
  );
}

/** The options of an eval given none: one frozen object, read only, rather than one per eval. */
const NO_EVAL_OPTIONS: EvalOptions = Object.freeze({});

/** The guest's Date.now() for the eval about to start: undefined for the real clock. */
export function evalClockMs(clock: SandboxClock): number | undefined {
  if (clock === "real") return undefined;
  if (clock === "frozen") return Date.now();
  let ms: unknown;
  try {
    ms = clock.now();
  } catch (err) {
    throw new SandboxError("INVALID_ARGUMENT", "the sandbox's clock.now() threw", { cause: err });
  }
  if (typeof ms !== "number" || !Number.isFinite(ms) || Math.abs(ms) > MAX_TIME_MS) {
    throw invalid(
      `clock.now() must return a finite number of ms within ±${MAX_TIME_MS}; got ${formatWithOptions({ depth: 0 }, "%O", ms)}`,
    );
  }
  return ms;
}

const EVAL_OPTION_KEYS = [
  "timeoutMs",
  "wallTimeoutMs",
  "filename",
  "signal",
  "unserializable",
  "onConsole",
  "clockMs",
  "randomSeed",
  "inline",
  "displayChars",
  "wallHold",
  "tenant",
] as const;

export function validateEvalOptions(code: unknown, options: unknown): EvalOptions {
  if (typeof code !== "string" && !(code instanceof Uint8Array))
    throw invalid(`code must be a string or a Uint8Array of UTF-8; got ${typeof code}`);
  if (options === undefined) return NO_EVAL_OPTIONS;
  if (typeof options !== "object" || options === null) throw invalid("eval options must be an object");
  // Read once, into plain data: a getter or Proxy trap of the caller's object runs here and never
  // again, neither between validation and use nor while an outcome waits in the exchange buffer.
  const o: EvalOptions = { ...options };
  checkKeys("eval", o, EVAL_OPTION_KEYS);
  if (o.timeoutMs !== undefined) checkTimeout("timeoutMs", o.timeoutMs);
  if (o.wallTimeoutMs !== undefined) checkTimeout("wallTimeoutMs", o.wallTimeoutMs);
  if (
    o.filename !== undefined &&
    (typeof o.filename !== "string" || o.filename.length > SANDBOX_LIMITS.maxFilenameChars)
  ) {
    throw invalid(`filename must be a string of at most ${SANDBOX_LIMITS.maxFilenameChars} characters`);
  }
  if (o.signal !== undefined && !(o.signal instanceof AbortSignal)) throw invalid("signal must be an AbortSignal");
  if (o.wallHold !== undefined && !(o.wallHold instanceof WallHold)) throw invalid("wallHold must be a WallHold");
  if (o.unserializable !== undefined && o.unserializable !== "throw" && o.unserializable !== "describe")
    throw invalid('unserializable must be "throw" or "describe"');
  if (o.onConsole !== undefined && typeof o.onConsole !== "function") throw invalid("onConsole must be a function");
  if (
    o.clockMs !== undefined &&
    (typeof o.clockMs !== "number" || !Number.isFinite(o.clockMs) || Math.abs(o.clockMs) > MAX_TIME_MS)
  ) {
    throw invalid(
      `clockMs must be a finite number of ms within ±${MAX_TIME_MS}; got ${formatWithOptions({ depth: 0 }, "%O", o.clockMs)}`,
    );
  }
  if (o.randomSeed !== undefined) checkInteger("randomSeed", o.randomSeed, 0, Number.MAX_SAFE_INTEGER);
  if (o.inline !== undefined && typeof o.inline !== "boolean") throw invalid("inline must be a boolean");
  if (o.displayChars !== undefined) checkInteger("displayChars", o.displayChars, 0, Number.MAX_SAFE_INTEGER);
  if (o.tenant !== undefined && (typeof o.tenant !== "string" || o.tenant.length > MAX_TENANT_CHARS))
    throw invalid(`tenant must be a string of at most ${MAX_TENANT_CHARS} characters`);
  return o;
}

// Words that cannot name a function in sloppy-mode code.
const RESERVED_WORDS = new Set(
  "await break case catch class const continue debugger default delete do else enum export extends false finally for function if import in instanceof new null return super switch this throw true try typeof var void while with".split(
    " ",
  ),
);

export function checkGlobalName(name: unknown): asserts name is string {
  if (typeof name !== "string" || !PATH_SEGMENT.test(name) || FORBIDDEN_SEGMENTS.has(name))
    throw invalid("name must be an identifier");
}

/** A global function name and its host function (`defineFrozenAsyncFunction`). */
export function checkFunctionName(name: unknown, fn: unknown): asserts name is string {
  checkGlobalName(name);
  if (RESERVED_WORDS.has(name)) throw invalid(`'${name}' is a reserved word and cannot name a function`);
  if (typeof fn !== "function") throw invalid("fn must be a function");
}

export function validatePath(name: unknown): string {
  if (typeof name !== "string" || name.length > SANDBOX_LIMITS.maxFunctionPathChars)
    throw invalid(`name must be a string of at most ${SANDBOX_LIMITS.maxFunctionPathChars} characters`);
  const segments = name.split(".");
  for (const s of segments) {
    if (!PATH_SEGMENT.test(s) || FORBIDDEN_SEGMENTS.has(s))
      throw invalid(`'${name}' is not a valid global name or dotted path of identifiers`);
  }
  return name;
}
