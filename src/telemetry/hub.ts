/**
 * The engine's one publishing point for telemetry. A sandbox asks {@link observeEval} once per eval;
 * with no consumer (no diagnostics_channel subscriber, no OpenTelemetry SDK registered, no
 * `onUsage`) it answers undefined after a few flag reads and nothing else is built. Otherwise the
 * eval gets an {@link EvalObservation}, which counts its host calls and hands what the engine
 * measured (its report) to each consumer when it ends: diagnostics channels, OpenTelemetry
 * (src/telemetry/otel.ts) and usage records (src/telemetry/usage.ts).
 */
import { createHash } from "node:crypto";
import { channel } from "node:diagnostics_channel";
import { performance } from "node:perf_hooks";
import type { EvalReport, SourceCode } from "../types.js";
import { openTelemetry } from "./otel.js";
import { deliverUsage, type UsageRecord } from "./usage.js";

/** The longest `tenant` an eval accepts. */
export const MAX_TENANT_CHARS = 1024;

/** Where evals run. Only the in-process tier exists today. */
export const TIER = "in-process";

/** The diagnostics_channel names the engine publishes on (Node's `diagnostics_channel`, no dependency). */
export const TELEMETRY_CHANNELS = Object.freeze({
  /** An eval starts: {@link EvalStartMessage}. */
  evalStart: "quickjs-native:eval:start",
  /** An eval ended: {@link EvalEndMessage}. */
  evalEnd: "quickjs-native:eval:end",
  /** Guest code called a host function: {@link HostCallStartMessage}. */
  hostCallStart: "quickjs-native:host-call:start",
  /** That host call returned, threw or settled: {@link HostCallEndMessage}. */
  hostCallEnd: "quickjs-native:host-call:end",
});

/** Published on `quickjs-native:eval:start`. Never the code or values. */
export interface EvalStartMessage {
  /** Process-wide sequence number of the observed eval. */
  evalId: number;
  /** `"eval"` (async `eval`/`run`) or `"evalSync"`. */
  kind: "eval" | "evalSync";
  tier: string;
  /** Hex SHA-256 prefix of the eval's `tenant`, when it has one. */
  tenantHash: string | undefined;
  /** Length of the code: UTF-16 units, or bytes for code passed as UTF-8 bytes. */
  codeLength: number;
}

/** Published on `quickjs-native:eval:end`. */
export interface EvalEndMessage extends EvalStartMessage {
  /** `"OK"` or the error code (`"TIMEOUT"`, `"OUT_OF_MEMORY"`, ...). */
  outcome: string;
  executionMs: number;
  wallMs: number;
  /** Time spent queued behind the sandbox's earlier evals, ms. */
  queueMs: number;
  peakMemoryBytes: number;
  hostCalls: number;
}

/** Published on `quickjs-native:host-call:start`. */
export interface HostCallStartMessage {
  evalId: number;
  /** The host function's name as defined (`"tools.search"`), or the tool name it gave with {@link nameHostCall}. */
  name: string;
  /** `"<evalId>.<n>"`, or the id given with {@link nameHostCall}. */
  callId: string;
}

/** Published on `quickjs-native:host-call:end`. */
export interface HostCallEndMessage extends HostCallStartMessage {
  ok: boolean;
  durationMs: number;
}

const evalStartChannel = channel(TELEMETRY_CHANNELS.evalStart);
const evalEndChannel = channel(TELEMETRY_CHANNELS.evalEnd);
const callStartChannel = channel(TELEMETRY_CHANNELS.hostCallStart);
const callEndChannel = channel(TELEMETRY_CHANNELS.hostCallEnd);

/** What a consumer (OpenTelemetry) keeps of one host call. */
export interface CallSink {
  rename(name: string, callId: string): void;
  run<T>(fn: () => T): T;
  /** The call ended at `endedAt` (a `performance.now()` time), reported maybe a little later. */
  ended(ok: boolean, durationMs: number, endedAt: number): void;
}

/** What a consumer keeps of one eval. */
export interface EvalSink {
  /** `startedAt`: a `performance.now()` time. */
  callStarted(name: string, callId: string, startedAt: number): CallSink;
  ended(end: EvalEndMessage, bytesIn: number, bytesOut: number): void;
}

/** A consumer that follows evals. */
export interface EvalSinks {
  /** `startedAt`: a `performance.now()` time. */
  evalStarted(start: EvalStartMessage, startedAt: number): EvalSink;
}

let evalSeq = 0;
let liveSandboxes = 0;
let pendingEvals = 0;
let sandboxSeq = 0;
/** Guest memory in use after each live sandbox's last observed eval, by sandbox number. */
const memoryBySandbox = new Map<number, number>();

/** Numbers the OpenTelemetry gauges read. */
export function gaugeValues(): { liveSandboxes: number; pendingEvals: number; guestMemoryBytes: number } {
  let guestMemoryBytes = 0;
  for (const bytes of memoryBySandbox.values()) guestMemoryBytes += bytes;
  return { liveSandboxes, pendingEvals, guestMemoryBytes };
}

/** A sandbox was created: its number. */
export function sandboxOpened(): number {
  liveSandboxes++;
  return ++sandboxSeq;
}

/** The sandbox numbered `id` was disposed. */
export function sandboxClosed(id: number): void {
  liveSandboxes--;
  memoryBySandbox.delete(id);
}

/** Hashes of recent keys: an eval tool call hashes its session key and its tenant. */
const keyHashes = new Map<string, string>();
const KEPT_HASHES = 256;

/** Spans and messages carry a hash of the tenant or session key, never the key. */
export function keyHash(key: string): string {
  let hash = keyHashes.get(key);
  if (hash === undefined) {
    hash = createHash("sha256").update(key).digest("hex").slice(0, 16);
    if (keyHashes.size >= KEPT_HASHES) keyHashes.clear();
    keyHashes.set(key, hash);
  }
  return hash;
}

/** The host call whose function is running synchronously now (for {@link nameHostCall}). */
let currentCall: HostCallObservation | undefined;

/**
 * Names the host call running now for telemetry, from inside the host function before its first
 * `await`: a function that runs a tool reports the tool's own name and call id (its span's
 * `gen_ai.tool.name` and `gen_ai.tool.call.id`, its usage record's count). Does nothing when no
 * telemetry consumer is present.
 */
export function nameHostCall(toolName: string, callId?: string): void {
  const call = currentCall;
  if (call === undefined) return;
  call.eval.count(call.name, -1);
  call.eval.count(toolName, 1);
  call.name = toolName;
  if (callId !== undefined) call.callId = callId;
  call.otel?.rename(toolName, call.callId);
}

/** One host call of an observed eval. */
export class HostCallObservation {
  readonly eval: EvalObservation;
  readonly #started = performance.now();
  name: string;
  callId: string;
  readonly otel: CallSink | undefined;

  constructor(observed: EvalObservation, name: string, seq: number) {
    this.eval = observed;
    this.name = name;
    // Counted when it starts, as the engine counts it: one still in flight when the eval ends is in its record.
    observed.count(name, 1);
    this.callId = `${observed.evalId}.${seq}`;
    this.otel = observed.otel?.callStarted(name, this.callId, this.#started);
    if (callStartChannel.hasSubscribers)
      callStartChannel.publish({ evalId: observed.evalId, name, callId: this.callId } satisfies HostCallStartMessage);
  }

  /** Runs the host function (in the call's span context, for its own spans). */
  run<T>(fn: () => T): T {
    const outer = currentCall;
    currentCall = this;
    try {
      return this.otel === undefined ? fn() : this.otel.run(fn);
    } finally {
      currentCall = outer;
    }
  }

  /** Runs a sync host function whose result crosses without bytes (the primitive fast path) and ends the call. */
  whole<T>(fn: () => T): T {
    let result: T;
    try {
      result = this.run(fn);
    } catch (err) {
      this.finished(false, 0);
      throw err;
    }
    this.finished(!(result instanceof Promise), 0);
    return result;
  }

  /** {@link HostCallObservation.ended} and {@link HostCallObservation.report} at once (a sync call). */
  finished(ok: boolean, resultBytes: number): void {
    this.ended(ok, resultBytes);
    this.report();
  }

  #ok = false;
  #endedAt = 0;

  /**
   * The call returned, threw or settled; `resultBytes` were copied into the guest. Counted now;
   * its span and metric wait for {@link HostCallObservation.report}, so that an async call's
   * answer reaches the guest first (the engine's threads wait for it only microseconds before
   * sleeping, and a wake-up costs far more than the span).
   */
  ended(ok: boolean, resultBytes: number): void {
    this.#endedAt = performance.now();
    this.#ok = ok;
    const durationMs = this.#endedAt - this.#started;
    const observed = this.eval;
    observed.bytesIn += resultBytes;
    if (callEndChannel.hasSubscribers)
      callEndChannel.publish({
        evalId: observed.evalId,
        name: this.name,
        callId: this.callId,
        ok,
        durationMs,
      } satisfies HostCallEndMessage);
  }

  /** Reports the ended call to OpenTelemetry (its span ends when the call did). */
  report(): void {
    this.otel?.ended(this.#ok, this.#endedAt - this.#started, this.#endedAt);
  }
}

/** One eval some consumer observes: what the engine measured, gathered once. */
export class EvalObservation {
  readonly evalId = ++evalSeq;
  readonly #sandbox: number;
  readonly #onUsage: ((record: UsageRecord) => void) | undefined;
  readonly #start: EvalStartMessage;
  readonly #queuedAt = performance.now();
  #startedAt = this.#queuedAt;
  #calls = 0;
  readonly tenant: string | undefined;
  readonly otel: EvalSink | undefined;
  /** Host calls by name (the defined name, or the tool name given with {@link nameHostCall}). */
  readonly hostCallsByName = new Map<string, number>();
  /** Bytes copied into the guest: the code (UTF-8) and host-call results. */
  bytesIn: number;
  /** Bytes copied out of the guest: host-call arguments, the result and the console. */
  bytesOut = 0;

  constructor(
    sandbox: number,
    kind: "eval" | "evalSync",
    code: SourceCode,
    tenant: string | undefined,
    onUsage: ((record: UsageRecord) => void) | undefined,
    otel: EvalSinks | undefined,
  ) {
    this.#sandbox = sandbox;
    this.#onUsage = onUsage;
    this.tenant = tenant;
    this.bytesIn = typeof code === "string" ? Buffer.byteLength(code) : code.byteLength;
    this.#start = {
      evalId: this.evalId,
      kind,
      tier: TIER,
      tenantHash: tenant === undefined ? undefined : keyHash(tenant),
      codeLength: typeof code === "string" ? code.length : code.byteLength,
    };
    this.otel = otel?.evalStarted(this.#start, this.#queuedAt);
    pendingEvals++;
    if (evalStartChannel.hasSubscribers) evalStartChannel.publish(this.#start);
  }

  /** The eval leaves its sandbox's queue and runs (`evalSync` never queues: no clock read). */
  running(): void {
    if (this.#start.kind === "eval") this.#startedAt = performance.now();
  }

  /** A host call of this eval starts; `argumentBytes` were copied out for it. */
  callStarted(name: string, argumentBytes: number): HostCallObservation {
    this.bytesOut += argumentBytes;
    return new HostCallObservation(this, name, ++this.#calls);
  }

  /** Adds `n` to the count of host calls named `name`. */
  count(name: string, n: number): void {
    const count = (this.hostCallsByName.get(name) ?? 0) + n;
    if (count === 0) this.hostCallsByName.delete(name);
    else this.hostCallsByName.set(name, count);
  }

  /** The eval ended with `report` (its value and console bytes are already in `bytesOut`). */
  ended(report: EvalReport): void {
    pendingEvals--;
    const { stats } = report;
    memoryBySandbox.set(this.#sandbox, stats.memoryUsedBytes);
    const queueMs = this.#startedAt - this.#queuedAt;
    const outcome = report.ok ? "OK" : report.error.code;
    const start = this.#start;
    const end: EvalEndMessage = {
      evalId: start.evalId,
      kind: start.kind,
      tier: start.tier,
      tenantHash: start.tenantHash,
      codeLength: start.codeLength,
      outcome,
      executionMs: stats.executionMs,
      wallMs: stats.wallMs,
      queueMs,
      peakMemoryBytes: stats.peakMemoryBytes,
      hostCalls: stats.hostCalls,
    };
    this.otel?.ended(end, this.bytesIn, this.bytesOut);
    if (evalEndChannel.hasSubscribers) evalEndChannel.publish(end);
    if (this.#onUsage !== undefined) {
      deliverUsage(this.#onUsage, {
        tenant: this.tenant ?? "",
        evalId: this.evalId,
        outcome,
        cpuMicros: stats.executionMs * 1000,
        wallMicros: stats.wallMs * 1000,
        memoryPeakBytes: stats.peakMemoryBytes,
        hostCalls: stats.hostCalls,
        hostCallsByName: Object.fromEntries(this.hostCallsByName),
        bytesIn: this.bytesIn,
        bytesOut: this.bytesOut,
      });
    }
  }
}

/**
 * The observation of an eval about to be queued or run, or undefined when nobody listens (the
 * common case, a few flag reads).
 */
export function observeEval(
  sandbox: number,
  kind: "eval" | "evalSync",
  code: unknown,
  tenant: unknown,
  onUsage: ((record: UsageRecord) => void) | undefined,
): EvalObservation | undefined {
  const otel = openTelemetry();
  if (
    otel === undefined &&
    onUsage === undefined &&
    !evalStartChannel.hasSubscribers &&
    !evalEndChannel.hasSubscribers &&
    !callStartChannel.hasSubscribers &&
    !callEndChannel.hasSubscribers
  )
    return undefined;
  // Bad arguments are refused by the eval's own checks, after this.
  const key = typeof tenant === "string" && tenant.length <= MAX_TENANT_CHARS ? tenant : undefined;
  return new EvalObservation(
    sandbox,
    kind,
    typeof code === "string" || code instanceof Uint8Array ? code : "",
    key,
    onUsage,
    otel,
  );
}

/**
 * Runs `work` (a snapshot, restore or journal write) in a span named `name` when OpenTelemetry is
 * present, with the byte count `bytesOf` reads from its result; else just runs it.
 */
export function traceOperation<T>(name: string, work: () => T, bytesOf: (result: Awaited<T>) => number): T {
  const otel = openTelemetry();
  return otel === undefined ? work() : otel.operation(name, work, bytesOf);
}

/**
 * Runs `work` in an active span `name` with `attributes` when OpenTelemetry is present (spans
 * `work` starts nest below it), else just runs it. For layers above the engine (the eval tool).
 */
export function traceActive<T>(
  name: string,
  attributes: Readonly<Record<string, string | number | boolean>>,
  work: () => Promise<T>,
): Promise<T> {
  const otel = openTelemetry();
  return otel === undefined ? work() : otel.active(name, attributes, work);
}
