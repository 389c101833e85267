/**
 * Command-line flags shared by `repl` and `eval`: the sandbox limits, parsed from human units.
 */
import { SANDBOX_DEFAULTS, SANDBOX_LIMITS } from "../index.js";
import type { SandboxOptions } from "../index.js";

/** Flag definitions for node:util parseArgs, limit flags only. */
export const LIMIT_FLAGS = {
  "memory-limit": { type: "string" },
  "stack-size": { type: "string" },
  timeout: { type: "string" },
  "wall-timeout": { type: "string" },
} as const;

/** `64MiB`, `512KiB`: a size as the flags accept it. */
function sizeText(bytes: number): string {
  return bytes % 1024 ** 2 === 0
    ? `${bytes / 1024 ** 2}MiB`
    : bytes % 1024 === 0
      ? `${bytes / 1024}KiB`
      : String(bytes);
}

/** Help lines describing {@link LIMIT_FLAGS}. */
export const LIMIT_HELP = [
  `  --memory-limit <size>   heap cap of the sandbox, e.g. 64MiB, 512k, 1048576 (default ${sizeText(SANDBOX_DEFAULTS.memoryLimitBytes)})`,
  `  --stack-size <size>     guest stack cap (default ${sizeText(SANDBOX_DEFAULTS.maxStackSizeBytes)})`,
  `  --timeout <ms>          guest execution budget per eval (default ${SANDBOX_DEFAULTS.executionTimeoutMs})`,
  `  --wall-timeout <ms>     wall-clock budget per eval, host waits included (default ${SANDBOX_DEFAULTS.wallTimeoutMs})`,
].join("\n");

/** A user mistake on the command line: printed without a stack, exit code 2. */
export class UsageError extends Error {
  override readonly name = "UsageError";
}

const UNITS: Record<string, number> = {
  "": 1,
  b: 1,
  k: 1024,
  kb: 1024,
  kib: 1024,
  m: 1024 ** 2,
  mb: 1024 ** 2,
  mib: 1024 ** 2,
  g: 1024 ** 3,
  gb: 1024 ** 3,
  gib: 1024 ** 3,
};

/** Parses `64MiB`, `512k`, `1048576` into bytes (binary units: 1k = 1024). */
export function parseSize(flag: string, text: string): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-z]*)\s*$/i.exec(text);
  const unit = m ? UNITS[m[2]!.toLowerCase()] : undefined;
  if (!m || unit === undefined)
    throw new UsageError(`--${flag}: '${text}' is not a size (examples: 64MiB, 512k, 1048576)`);
  return Math.round(Number(m[1]) * unit);
}

function parseMs(flag: string, text: string): number {
  const n = Number(text);
  if (!/^\s*\d+(\.\d+)?\s*$/.test(text) || !(n > 0))
    throw new UsageError(`--${flag}: '${text}' is not a positive number of milliseconds`);
  return n;
}

/** A size flag within the engine's range for it. */
function sizeIn(flag: string, text: string, range: { min: number; max: number }): number {
  const bytes = parseSize(flag, text);
  if (bytes < range.min || bytes > range.max)
    throw new UsageError(`--${flag}: ${text} is out of range (${sizeText(range.min)} to ${sizeText(range.max)})`);
  return bytes;
}

function msIn(flag: string, text: string): number {
  const ms = parseMs(flag, text);
  if (ms > SANDBOX_LIMITS.maxTimeoutMs)
    throw new UsageError(`--${flag}: ${text} is out of range (at most ${SANDBOX_LIMITS.maxTimeoutMs} ms)`);
  return ms;
}

/** Turns the parsed limit flags into sandbox options; flags left out keep the engine defaults. */
export function sandboxOptionsFrom(values: { [K in keyof typeof LIMIT_FLAGS]?: string }): SandboxOptions {
  const options: SandboxOptions = {};
  if (values["memory-limit"] !== undefined)
    options.memoryLimitBytes = sizeIn("memory-limit", values["memory-limit"], SANDBOX_LIMITS.memoryLimitBytes);
  if (values["stack-size"] !== undefined)
    options.maxStackSizeBytes = sizeIn("stack-size", values["stack-size"], SANDBOX_LIMITS.maxStackSizeBytes);
  if (values.timeout !== undefined) options.executionTimeoutMs = msIn("timeout", values.timeout);
  if (values["wall-timeout"] !== undefined) options.wallTimeoutMs = msIn("wall-timeout", values["wall-timeout"]);
  return options;
}
