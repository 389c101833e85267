/**
 * The OpenTelemetry consumer. `@opentelemetry/api` is an optional peer dependency: it is loaded
 * (once) only after an SDK registered a tracer or meter provider in the API's global registry, which
 * is read here without the API. Without an SDK, a check costs one global property read per eval.
 */
import { createRequire } from "node:module";
import { performance } from "node:perf_hooks";
import type * as OtelApi from "@opentelemetry/api";
import type { CallSink, EvalEndMessage, EvalSink, EvalSinks, EvalStartMessage } from "./hub.js";
import { gaugeValues, TIER } from "./hub.js";
import { METRICS } from "./metrics.js";

/** The instrumentation scope of every span and metric. */
const SCOPE = "quickjs-native";

/** Where `@opentelemetry/api` 1.x keeps what an SDK registered (its `trace`, `metrics`, `context`). */
const OTEL_GLOBAL = Symbol.for("opentelemetry.js.api.1");
interface OtelGlobal {
  trace?: object;
  metrics?: object;
}

let api: typeof OtelApi | null | undefined;

function loadApi(): typeof OtelApi | null {
  if (api === undefined) {
    try {
      api = createRequire(import.meta.url)("@opentelemetry/api") as typeof OtelApi;
    } catch {
      api = null; // an SDK without the API package where we can load it: nothing to report to
    }
  }
  return api;
}

let consumer: OtelConsumer | undefined;

/** The consumer for what is registered now, or undefined when no SDK is. */
export function openTelemetry(): OtelConsumer | undefined {
  const registered = (globalThis as { [OTEL_GLOBAL]?: OtelGlobal })[OTEL_GLOBAL];
  if (registered === undefined || (registered.trace === undefined && registered.metrics === undefined))
    return undefined;
  if (consumer?.serves(registered)) return consumer;
  const loaded = loadApi();
  if (loaded === null) return undefined;
  consumer = new OtelConsumer(loaded, registered);
  return consumer;
}

type Attributes = OtelApi.Attributes;

/** Attribute objects kept by outcome code or tool name (a few of each), cleared past this many. */
const KEPT_ATTRIBUTES = 256;

/**
 * The epoch time of `performance.now()`'s zero on the clock the SDK stamps its own spans with:
 * `Date.now()` (a span made without a start time is anchored to it). `performance.timeOrigin` is
 * a different clock that drifts from it (2.6 ms in one CI run), and a tool's own span, stamped by
 * the SDK, then started before the host-call span it nests under. Read again once a second, which
 * follows the drift and costs two clock reads per second at most.
 */
let epochOfZeroMs = Date.now() - performance.now();
let anchoredAt = performance.now();
const ANCHOR_AGE_MS = 1000;

/**
 * A `performance.now()` time as the SDK's [seconds, nanoseconds] since the epoch: handed over as
 * such, the SDK takes it as is instead of converting it with two more clock reads.
 */
function hrTimeOf(nowMs: number): OtelApi.HrTime {
  if (nowMs - anchoredAt > ANCHOR_AGE_MS) {
    anchoredAt = performance.now();
    epochOfZeroMs = Date.now() - anchoredAt;
  }
  const epochMs = epochOfZeroMs + nowMs;
  const s = Math.floor(epochMs / 1000);
  return [s, Math.min(999_999_999, Math.round((epochMs - s * 1000) * 1e6))];
}

/** Finished spans waiting to be handed to the SDK past this many are handed over at once. */
const MAX_DEFERRED = 1024;

/** A finished eval or host call whose span and metric records wait for {@link handOver}. */
interface Deferred {
  hand(): void;
}

let deferred: Deferred[] = [];
let warned = false;

/**
 * Hands every finished eval and host call to the SDK: spans made (or ended) with the times
 * recorded when they ran, and their metric records. Runs at the end of the microtask checkpoint
 * in which the first of them finished, so that a caller of `evalSync` has its answer first.
 */
function handOver(): void {
  const batch = deferred;
  deferred = [];
  for (const item of batch) {
    try {
      item.hand();
    } catch (err) {
      if (!warned) {
        warned = true;
        process.emitWarning(
          `quickjs-native: the OpenTelemetry SDK threw while taking a span (later throws are not reported): ${(err as Error)?.message ?? String(err)}`,
          "TelemetryWarning",
        );
      }
    }
  }
}

function defer(item: Deferred): void {
  if (deferred.length === 0) queueMicrotask(handOver);
  deferred.push(item);
  if (deferred.length >= MAX_DEFERRED) handOver(); // a long run of sync work holds a bounded batch
}

/**
 * A span made only when something needs it: a child span's parent, code reading or writing the
 * active span inside a host function, or {@link handOver} after it finished. It starts at the time
 * recorded when it was created, so that the span is the same whenever the SDK makes it.
 */
abstract class LazySpan implements OtelApi.Span, Deferred {
  protected readonly consumer: OtelConsumer;
  protected readonly parent: OtelApi.Context;
  protected readonly startedAt: number;
  protected name: string;
  #span: OtelApi.Span | undefined;

  /** `startedAt`: when it started, a `performance.now()` time. */
  constructor(consumer: OtelConsumer, parent: OtelApi.Context, name: string, startedAt: number) {
    this.consumer = consumer;
    this.parent = parent;
    this.name = name;
    this.startedAt = startedAt;
  }

  protected abstract attributes(): Attributes;
  abstract hand(): void;

  /** The SDK's span (made now when it was not yet). */
  protected real(): OtelApi.Span {
    this.#span ??= this.consumer.tracer.startSpan(
      this.name,
      { attributes: this.attributes(), startTime: hrTimeOf(this.startedAt) },
      this.parent,
    );
    return this.#span;
  }

  /** The SDK's span when it was made already. */
  protected made(): OtelApi.Span | undefined {
    return this.#span;
  }

  spanContext(): OtelApi.SpanContext {
    return this.real().spanContext();
  }
  setAttribute(key: string, value: OtelApi.SpanAttributeValue): this {
    this.real().setAttribute(key, value);
    return this;
  }
  setAttributes(attributes: OtelApi.SpanAttributes): this {
    this.real().setAttributes(attributes);
    return this;
  }
  addEvent(
    name: string,
    attributesOrStartTime?: OtelApi.SpanAttributes | OtelApi.TimeInput,
    startTime?: OtelApi.TimeInput,
  ): this {
    this.real().addEvent(name, attributesOrStartTime, startTime);
    return this;
  }
  addLink(link: OtelApi.Link): this {
    this.real().addLink(link);
    return this;
  }
  addLinks(links: OtelApi.Link[]): this {
    this.real().addLinks(links);
    return this;
  }
  setStatus(status: OtelApi.SpanStatus): this {
    this.real().setStatus(status);
    return this;
  }
  updateName(name: string): this {
    this.real().updateName(name);
    return this;
  }
  end(endTime?: OtelApi.TimeInput): void {
    this.real().end(endTime);
  }
  isRecording(): boolean {
    return this.real().isRecording();
  }
  recordException(exception: OtelApi.Exception, time?: OtelApi.TimeInput): void {
    this.real().recordException(exception, time);
  }
}

/** A host call's span. */
export class OtelCall extends LazySpan implements CallSink {
  readonly #context: OtelApi.Context;
  #callId: string;
  #toolName: string;
  #ok = false;
  #durationMs = 0;
  #endedAt = 0;

  constructor(consumer: OtelConsumer, parent: OtelApi.Context, name: string, callId: string, startedAt: number) {
    super(consumer, parent, `execute_tool ${name}`, startedAt);
    this.#toolName = name;
    this.#callId = callId;
    this.#context = consumer.api.trace.setSpan(parent, this);
  }

  protected attributes(): Attributes {
    return {
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": this.#toolName,
      "gen_ai.tool.call.id": this.#callId,
      "gen_ai.tool.type": "function",
    };
  }

  rename(name: string, callId: string): void {
    this.#toolName = name;
    this.#callId = callId;
    this.name = `execute_tool ${name}`;
    const span = this.made();
    if (span === undefined) return;
    span.updateName(this.name);
    span.setAttributes(this.attributes());
  }

  run<T>(fn: () => T): T {
    return this.consumer.api.context.with(this.#context, fn);
  }

  ended(ok: boolean, durationMs: number, endedAt: number): void {
    this.#ok = ok;
    this.#durationMs = durationMs;
    this.#endedAt = endedAt;
    defer(this);
  }

  hand(): void {
    const span = this.real();
    const consumer = this.consumer;
    if (!this.#ok) span.setStatus({ code: consumer.api.SpanStatusCode.ERROR });
    span.end(hrTimeOf(this.#endedAt));
    consumer.hostCallDuration.record(this.#durationMs / 1000, consumer.toolAttributes(this.#toolName));
  }
}

/** An eval's span. */
export class OtelEval extends LazySpan implements EvalSink {
  readonly #start: EvalStartMessage;
  #context: OtelApi.Context | undefined; // the span's context, made when a host call first needs it
  #end: EvalEndMessage | undefined;
  #bytesIn = 0;
  #bytesOut = 0;
  #endedAt = 0;

  constructor(consumer: OtelConsumer, start: EvalStartMessage, startedAt: number) {
    // Its parent is the caller's active span (the eval tool's, an agent's).
    super(
      consumer,
      consumer.api.context.active(),
      start.kind === "eval" ? "quickjs_native.eval" : "quickjs_native.evalSync",
      startedAt,
    );
    this.#start = start;
  }

  /** Its start attributes, and its end attributes too once it ended (a span made after it ended gets all at once). */
  protected attributes(): Attributes {
    const start = this.#start;
    const attributes: Attributes = {
      "quickjs_native.tier": start.tier,
      "quickjs_native.code.length": start.codeLength,
    };
    if (start.tenantHash !== undefined) attributes["quickjs_native.tenant.hash"] = start.tenantHash;
    return this.#end === undefined ? attributes : Object.assign(attributes, this.#endAttributes(this.#end));
  }

  #endAttributes(end: EvalEndMessage): Attributes {
    const attributes: Attributes = {
      "quickjs_native.outcome": end.outcome,
      "quickjs_native.execution_ms": end.executionMs,
      "quickjs_native.wall_ms": end.wallMs,
      "quickjs_native.queue_ms": end.queueMs,
      "quickjs_native.memory.peak_bytes": end.peakMemoryBytes,
      "quickjs_native.host_calls": end.hostCalls,
      "quickjs_native.bytes_in": this.#bytesIn,
      "quickjs_native.bytes_out": this.#bytesOut,
    };
    if (end.outcome !== "OK") attributes["error.type"] = end.outcome;
    return attributes;
  }

  callStarted(name: string, callId: string, startedAt: number): OtelCall {
    this.#context ??= this.consumer.api.trace.setSpan(this.parent, this);
    return new OtelCall(this.consumer, this.#context, name, callId, startedAt);
  }

  ended(end: EvalEndMessage, bytesIn: number, bytesOut: number): void {
    this.#endedAt = performance.now();
    this.#end = end;
    this.#bytesIn = bytesIn;
    this.#bytesOut = bytesOut;
    defer(this);
  }

  hand(): void {
    const end = this.#end!;
    const made = this.made(); // live already: a host call's span needed it as its parent
    const span = this.real();
    const c = this.consumer;
    if (made !== undefined) span.setAttributes(this.#endAttributes(end));
    if (end.outcome !== "OK") span.setStatus({ code: c.api.SpanStatusCode.ERROR, message: end.outcome });
    span.end(hrTimeOf(this.#endedAt));
    // Each record costs the SDK a hash of its attributes (~2 µs): the eval count is read from the
    // consumer's own tally when the SDK collects, and only an eval that can queue records its wait.
    c.evalDuration.record(end.wallMs / 1000, c.evalEnded(end.outcome));
    if (this.#start.kind === "eval") c.queueDuration.record(end.queueMs / 1000, c.tierAttributes);
  }
}

/** Spans and instruments of one registered SDK. */
export class OtelConsumer implements EvalSinks {
  readonly api: typeof OtelApi;
  readonly #registered: OtelGlobal;
  readonly #trace: object | undefined;
  readonly #metrics: object | undefined;
  readonly tracer: OtelApi.Tracer;
  /** Evals ended by outcome code, with the metric attributes of each code. */
  readonly #outcomes = new Map<string, { attributes: Attributes; count: number }>();
  readonly #tools = new Map<string, Attributes>();
  readonly tierAttributes: Attributes = Object.freeze({ "quickjs_native.tier": TIER });
  readonly evalDuration: OtelApi.Histogram;
  readonly queueDuration: OtelApi.Histogram;
  readonly hostCallDuration: OtelApi.Histogram;

  constructor(otel: typeof OtelApi, registered: OtelGlobal) {
    this.api = otel;
    this.#registered = registered;
    this.#trace = registered.trace;
    this.#metrics = registered.metrics;
    this.tracer = otel.trace.getTracer(SCOPE);
    const meter = otel.metrics.getMeter(SCOPE);
    const histogram = (m: { name: string; unit: string; description: string }): OtelApi.Histogram =>
      meter.createHistogram(m.name, { unit: m.unit, description: m.description });
    const evals = meter.createObservableCounter(METRICS.evals.name, {
      unit: METRICS.evals.unit,
      description: METRICS.evals.description,
    });
    this.evalDuration = histogram(METRICS.evalDuration);
    this.queueDuration = histogram(METRICS.queueDuration);
    this.hostCallDuration = histogram(METRICS.hostCallDuration);
    const sandboxes = meter.createObservableGauge(METRICS.sandboxes.name, {
      unit: METRICS.sandboxes.unit,
      description: METRICS.sandboxes.description,
    });
    const pending = meter.createObservableGauge(METRICS.pending.name, {
      unit: METRICS.pending.unit,
      description: METRICS.pending.description,
    });
    const memory = meter.createObservableGauge(METRICS.memory.name, {
      unit: METRICS.memory.unit,
      description: METRICS.memory.description,
    });
    meter.addBatchObservableCallback(
      (result) => {
        const g = gaugeValues();
        result.observe(sandboxes, g.liveSandboxes);
        result.observe(pending, g.pendingEvals);
        result.observe(memory, g.guestMemoryBytes);
        for (const { attributes, count } of this.#outcomes.values()) result.observe(evals, count, attributes);
      },
      [sandboxes, pending, memory, evals],
    );
  }

  /** Counts an eval that ended with `outcome`: the attributes of its records. */
  evalEnded(outcome: string): Attributes {
    let kept = this.#outcomes.get(outcome);
    if (kept === undefined) {
      // Outcome codes are the few SandboxError codes: the tally stays small.
      kept = {
        attributes: Object.freeze({ "quickjs_native.outcome": outcome, "quickjs_native.tier": TIER }),
        count: 0,
      };
      this.#outcomes.set(outcome, kept);
    }
    kept.count++;
    return kept.attributes;
  }

  /** The attributes of a host call's records. */
  toolAttributes(name: string): Attributes {
    let attributes = this.#tools.get(name);
    if (attributes === undefined) {
      if (this.#tools.size >= KEPT_ATTRIBUTES) this.#tools.clear();
      attributes = Object.freeze({ "gen_ai.tool.name": name });
      this.#tools.set(name, attributes);
    }
    return attributes;
  }

  /** True while the SDK it was made for is the one registered. */
  serves(registered: OtelGlobal): boolean {
    return registered === this.#registered && registered.trace === this.#trace && registered.metrics === this.#metrics;
  }

  evalStarted(start: EvalStartMessage, startedAt: number): OtelEval {
    return new OtelEval(this, start, startedAt);
  }

  operation<T>(name: string, work: () => T, bytesOf: (result: Awaited<T>) => number): T {
    const otel = this.api;
    const span = this.tracer.startSpan(name, { attributes: { "quickjs_native.tier": TIER } });
    const failed = (err: unknown): never => {
      span.setAttribute(
        "error.type",
        (err as { code?: unknown })?.code === undefined ? "Error" : String((err as { code: unknown }).code),
      );
      span.setStatus({ code: otel.SpanStatusCode.ERROR });
      span.end();
      throw err;
    };
    const done = (result: Awaited<T>): Awaited<T> => {
      span.setAttribute("quickjs_native.bytes", bytesOf(result));
      span.end();
      return result;
    };
    let result: T;
    try {
      result = otel.context.with(otel.trace.setSpan(otel.context.active(), span), work);
    } catch (err) {
      return failed(err);
    }
    if (result instanceof Promise) return result.then(done, failed) as T;
    return done(result as Awaited<T>) as T;
  }

  active<T>(
    name: string,
    attributes: Readonly<Record<string, string | number | boolean>>,
    work: () => Promise<T>,
  ): Promise<T> {
    const otel = this.api;
    return this.tracer.startActiveSpan(name, { attributes }, async (span) => {
      try {
        return await work();
      } catch (err) {
        span.setStatus({ code: otel.SpanStatusCode.ERROR });
        throw err;
      } finally {
        span.end();
      }
    });
  }
}
