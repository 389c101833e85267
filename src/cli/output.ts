/**
 * How eval results reach the terminal: values shown like Node's REPL (util.inspect), guest
 * errors like Node's uncaught errors, and a JSON form for scripts.
 */
import { inspect } from "node:util";
import { renderValue, type ConsoleEntry, type EvalReport, type EvalStats, type SandboxError } from "../index.js";

/** A value shows in at most about this many characters (the renderer's work is bounded by it). */
const SHOWN_CHARS = 200_000;

/**
 * Renders a value as Node's REPL would (errors as `TypeError: bad\n    at ...`, class instances
 * as `P { x: 1 }`), within {@link SHOWN_CHARS}.
 */
export function show(value: unknown, colors: boolean): string {
  return renderValue(value, SHOWN_CHARS, { colors });
}

/** Control characters a terminal acts on (ESC, BEL, CR, C1...): every C0 but tab and newline, DEL and C1. */
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/;
const CONTROLS = new RegExp(CONTROL.source, "g");

function isTerminal(stream: NodeJS.WritableStream): boolean {
  return (stream as { isTTY?: unknown }).isTTY === true;
}

/** `text` with every control character written as a visible `\xHH` escape. */
export function escapeControls(text: string): string {
  return text.replace(CONTROLS, (c) => `\\x${c.charCodeAt(0).toString(16).toUpperCase().padStart(2, "0")}`);
}

/**
 * `text` as it may reach `stream`: on a terminal, guest-written control characters are escaped, so
 * console output or an error message cannot move the cursor, retitle the window or ring the bell
 * (ESC, OSC, BEL sequences); pipes and files get the text unchanged.
 */
export function forStream(text: string, stream: NodeJS.WritableStream): string {
  return isTerminal(stream) ? escapeControls(text) : text;
}

/** A value as {@link show} renders it for `stream`: colored on a terminal unless guest text would carry control characters there. */
export function showOn(value: unknown, stream: NodeJS.WritableStream): string {
  const plain = show(value, false);
  if (!isTerminal(stream)) return plain;
  return CONTROL.test(plain) ? escapeControls(plain) : show(value, true);
}

/** `1.5 KiB`, `64 MiB`. */
export function formatBytes(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 ** 2) return `${(n / 1024).toFixed(1)} KiB`;
  return `${(n / 1024 ** 2).toFixed(1)} MiB`;
}

/** `1.23 ms`, `45 µs`. */
export function formatMs(ms: number): string {
  return ms < 1 ? `${Math.round(ms * 1000)} µs` : `${ms.toFixed(ms < 10 ? 2 : 1)} ms`;
}

/** One line of measurements shown after each REPL eval. */
export function statsLine(stats: EvalStats): string {
  const calls = stats.hostCalls ? ` · ${stats.hostCalls} host calls` : "";
  return `${formatMs(stats.executionMs)} exec · ${formatMs(stats.wallMs)} wall · ${formatBytes(stats.memoryUsedBytes)} used (peak ${formatBytes(stats.peakMemoryBytes)})${calls}`;
}

/** A failed eval as text: guest throws read like Node's `Uncaught ...`, engine stops name their code. */
export function describeError(error: SandboxError): string {
  if (error.guest) {
    const head = error.guest.nonError
      ? `Uncaught ${inspect(error.guest.message)}`
      : `Uncaught ${error.guest.name}: ${error.guest.message}`;
    const stack = error.guest.stack?.trimEnd();
    return stack ? `${head}\n${stack}` : head;
  }
  return `${error.code}: ${error.message}`;
}

/** Writes guest console output where Node's console would: log/info/debug to stdout, warn/error to stderr. */
export function replayConsole(
  entries: readonly ConsoleEntry[],
  truncated: boolean,
  out: NodeJS.WritableStream,
  err: NodeJS.WritableStream,
): void {
  for (const entry of entries) {
    const stream = entry.level === "warn" || entry.level === "error" ? err : out;
    stream.write(`${forStream(entry.text, stream)}\n`);
  }
  if (truncated) err.write("[console output truncated: maxConsoleBytes reached]\n");
}

/**
 * True when JSON.stringify/parse gives back exactly `value`: no undefined, BigInt, NaN, -0,
 * holes, Map, Date and the like, and no cycles.
 */
export function isJsonExact(value: unknown, ancestors: Set<object> = new Set()): boolean {
  switch (typeof value) {
    case "string":
    case "boolean":
      return true;
    case "number":
      return Number.isFinite(value) && !Object.is(value, -0);
    case "object": {
      if (value === null) return true;
      if (ancestors.has(value)) return false;
      ancestors.add(value);
      try {
        if (Array.isArray(value)) {
          for (let i = 0; i < value.length; i++) if (!(i in value) || !isJsonExact(value[i], ancestors)) return false;
          return true;
        }
        const proto: unknown = Object.getPrototypeOf(value);
        if (proto !== Object.prototype && proto !== null) return false;
        return Object.values(value).every((v) => isJsonExact(v, ancestors));
      } finally {
        ancestors.delete(value);
      }
    }
    default:
      return false;
  }
}

function roundMs(ms: number): number {
  return Math.round(ms * 1000) / 1000;
}

/** Machine-readable form of one eval: `value` only when JSON holds it exactly, `inspect` always. */
export function reportJson(report: EvalReport): string {
  // Measurements to the microsecond: more digits are noise, and read as precision.
  const stats = {
    ...report.stats,
    executionMs: roundMs(report.stats.executionMs),
    wallMs: roundMs(report.stats.wallMs),
  };
  const common = { console: report.console, consoleTruncated: report.consoleTruncated, stats };
  if (report.ok) {
    const exact = isJsonExact(report.value);
    return JSON.stringify({
      ok: true,
      ...(exact ? { value: report.value } : {}),
      inspect: show(report.value, false),
      ...common,
    });
  }
  const { code, message, guest, budget } = report.error;
  return JSON.stringify({
    ok: false,
    error: { code, message, ...(guest ? { guest } : {}), ...(budget ? { budget } : {}) },
    ...common,
  });
}
