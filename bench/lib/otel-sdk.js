// The OpenTelemetry SDK as the README's Observability section sets it up, with in-memory exporters:
// a tracer provider with a BatchSpanProcessor (what a deployment uses; SimpleSpanProcessor exports
// on every span end), an AsyncLocalStorage context manager, a meter provider with a periodic reader.
// For the benchmark rows "… with OpenTelemetry SDK" (bench/lib/child.js, mode `otel`) and
// bench/telemetry-overhead.js --otel.
import { context, metrics, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter } from "@opentelemetry/sdk-trace-base";

/** Registers the SDK in the API's global registry, where a library finds it. */
export function registerOtelSdk() {
  otelSdkSwitch().on();
}

/**
 * One SDK (providers, exporters, context manager) that can be registered and unregistered again
 * (bench/telemetry-overhead.js --interleaved): `on()` registers it, `off()` removes it.
 */
export function otelSdkSwitch() {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] });
  const contextManager = new AsyncLocalStorageContextManager();
  const reader = new PeriodicExportingMetricReader({
    exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE),
    exportIntervalMillis: 1000,
  });
  const meterProvider = new MeterProvider({ readers: [reader] });
  // The in-memory exporter keeps every span: emptied now and then so memory stays flat.
  setInterval(() => exporter.reset(), 200).unref();
  return {
    on() {
      trace.setGlobalTracerProvider(tracerProvider);
      context.setGlobalContextManager(contextManager.enable());
      metrics.setGlobalMeterProvider(meterProvider);
    },
    off() {
      trace.disable();
      metrics.disable();
      context.disable();
      contextManager.disable();
    },
  };
}
