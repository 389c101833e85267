/**
 * The OpenTelemetry consumer. `@opentelemetry/api` is an optional peer dependency: it is loaded
 * (once) only after an SDK registered a tracer or meter provider in the API's global registry, which
 * is read here without the API. Without an SDK, a check costs one global property read per eval.
 */
import { createRequire } from "node:module";
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
  if (registered === undefined || (registered.trace === undefined && registered.metrics === undefined)) return undefined;
  if (consumer?.serves(registered)) return consumer;
  const loaded = loadApi();
  if (loaded === null) return undefined;
  consumer = new OtelConsumer(loaded, registered);
  return consumer;
}

type Attributes = OtelApi.Attributes;

/** Attribute objects kept by outcome code or tool name (a few of each), cleared past this many. */
const KEPT_ATTRIBUTES = 256;

/** A host call's span. */
export class OtelCall implements CallSink {
  readonly #api: typeof OtelApi;
  readonly #span: OtelApi.Span;
  readonly #context: OtelApi.Context;
  readonly #consumer: OtelConsumer;
  #name: string;

  constructor(consumer: OtelConsumer, otel: typeof OtelApi, parent: OtelApi.Context, name: string, callId: string) {
    this.#api = otel;
    this.#consumer = consumer;
    this.#name = name;
    this.#span = consumer.tracer.startSpan(`execute_tool ${name}`, { attributes: toolAttributes(name, callId) }, parent);
    this.#context = otel.trace.setSpan(parent, this.#span);
  }

  rename(name: string, callId: string): void {
    this.#name = name;
    this.#span.updateName(`execute_tool ${name}`);
    this.#span.setAttributes(toolAttributes(name, callId));
  }

  run<T>(fn: () => T): T {
    return this.#api.context.with(this.#context, fn);
  }

  ended(ok: boolean, durationMs: number, endedAt: number): void {
    if (!ok) this.#span.setStatus({ code: this.#api.SpanStatusCode.ERROR });
    this.#span.end(endedAt);
    const consumer = this.#consumer;
    consumer.hostCallDuration.record(durationMs / 1000, consumer.toolAttributes(this.#name));
  }
}

function toolAttributes(name: string, callId: string): Attributes {
  return { "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": name, "gen_ai.tool.call.id": callId, "gen_ai.tool.type": "function" };
}

/** An eval's span. */
export class OtelEval implements EvalSink {
  readonly #consumer: OtelConsumer;
  readonly #api: typeof OtelApi;
  readonly #span: OtelApi.Span;
  readonly #parent: OtelApi.Context;
  readonly #kind: EvalStartMessage["kind"];
  #context: OtelApi.Context | undefined; // the span's context, made when a host call first needs it

  constructor(consumer: OtelConsumer, otel: typeof OtelApi, start: EvalStartMessage) {
    this.#consumer = consumer;
    this.#api = otel;
    const attributes: Attributes = { "quickjs_native.tier": start.tier, "quickjs_native.code.length": start.codeLength };
    if (start.tenantHash !== undefined) attributes["quickjs_native.tenant.hash"] = start.tenantHash;
    // Its parent is the caller's active span (the eval tool's, an agent's).
    const parent = otel.context.active();
    this.#parent = parent;
    this.#kind = start.kind;
    this.#span = consumer.tracer.startSpan(start.kind === "eval" ? "quickjs_native.eval" : "quickjs_native.evalSync", { attributes }, parent);
  }

  callStarted(name: string, callId: string): OtelCall {
    this.#context ??= this.#api.trace.setSpan(this.#parent, this.#span);
    return new OtelCall(this.#consumer, this.#api, this.#context, name, callId);
  }

  ended(end: EvalEndMessage, bytesIn: number, bytesOut: number): void {
    const span = this.#span;
    span.setAttributes({
      "quickjs_native.outcome": end.outcome,
      "quickjs_native.execution_ms": end.executionMs,
      "quickjs_native.wall_ms": end.wallMs,
      "quickjs_native.queue_ms": end.queueMs,
      "quickjs_native.memory.peak_bytes": end.peakMemoryBytes,
      "quickjs_native.host_calls": end.hostCalls,
      "quickjs_native.bytes_in": bytesIn,
      "quickjs_native.bytes_out": bytesOut,
    });
    if (end.outcome !== "OK") {
      span.setAttribute("error.type", end.outcome);
      span.setStatus({ code: this.#api.SpanStatusCode.ERROR, message: end.outcome });
    }
    span.end();
    // Each record costs the SDK a hash of its attributes (~2 µs): the eval count is read from the
    // consumer's own tally when the SDK collects, and only an eval that can queue records its wait.
    const c = this.#consumer;
    c.evalDuration.record(end.wallMs / 1000, c.evalEnded(end.outcome));
    if (this.#kind === "eval") c.queueDuration.record(end.queueMs / 1000, c.tierAttributes);
  }
}

/** Spans and instruments of one registered SDK. */
export class OtelConsumer implements EvalSinks {
  readonly #api: typeof OtelApi;
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
    this.#api = otel;
    this.#registered = registered;
    this.#trace = registered.trace;
    this.#metrics = registered.metrics;
    this.tracer = otel.trace.getTracer(SCOPE);
    const meter = otel.metrics.getMeter(SCOPE);
    const histogram = (m: { name: string; unit: string; description: string }): OtelApi.Histogram => meter.createHistogram(m.name, { unit: m.unit, description: m.description });
    const evals = meter.createObservableCounter(METRICS.evals.name, { unit: METRICS.evals.unit, description: METRICS.evals.description });
    this.evalDuration = histogram(METRICS.evalDuration);
    this.queueDuration = histogram(METRICS.queueDuration);
    this.hostCallDuration = histogram(METRICS.hostCallDuration);
    const sandboxes = meter.createObservableGauge(METRICS.sandboxes.name, { unit: METRICS.sandboxes.unit, description: METRICS.sandboxes.description });
    const pending = meter.createObservableGauge(METRICS.pending.name, { unit: METRICS.pending.unit, description: METRICS.pending.description });
    const memory = meter.createObservableGauge(METRICS.memory.name, { unit: METRICS.memory.unit, description: METRICS.memory.description });
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
      kept = { attributes: Object.freeze({ "quickjs_native.outcome": outcome, "quickjs_native.tier": TIER }), count: 0 };
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

  evalStarted(start: EvalStartMessage): OtelEval {
    return new OtelEval(this, this.#api, start);
  }

  operation<T>(name: string, work: () => T, bytesOf: (result: Awaited<T>) => number): T {
    const otel = this.#api;
    const span = this.tracer.startSpan(name, { attributes: { "quickjs_native.tier": TIER } });
    const failed = (err: unknown): never => {
      span.setAttribute("error.type", (err as { code?: unknown })?.code === undefined ? "Error" : String((err as { code: unknown }).code));
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

  active<T>(name: string, attributes: Readonly<Record<string, string | number | boolean>>, work: () => Promise<T>): Promise<T> {
    const otel = this.#api;
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
