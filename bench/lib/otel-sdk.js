// The OpenTelemetry SDK as the README's Observability section sets it up, with in-memory exporters:
// a tracer provider with a BatchSpanProcessor (what a deployment uses; SimpleSpanProcessor exports
// on every span end), an AsyncLocalStorage context manager, a meter provider with a periodic reader.
// For the benchmark rows "… with OpenTelemetry SDK" (bench/lib/child.js, mode `otel`) and
// bench/telemetry-overhead.js --otel.
import { context, metrics, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import { AggregationTemporality, InMemoryMetricExporter, MeterProvider, PeriodicExportingMetricReader } from "@opentelemetry/sdk-metrics";
import { BasicTracerProvider, BatchSpanProcessor, InMemorySpanExporter } from "@opentelemetry/sdk-trace-base";

/** Registers the SDK in the API's global registry, where a library finds it. */
export function registerOtelSdk() {
  const exporter = new InMemorySpanExporter();
  trace.setGlobalTracerProvider(new BasicTracerProvider({ spanProcessors: [new BatchSpanProcessor(exporter)] }));
  context.setGlobalContextManager(new AsyncLocalStorageContextManager().enable());
  const reader = new PeriodicExportingMetricReader({ exporter: new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE), exportIntervalMillis: 1000 });
  metrics.setGlobalMeterProvider(new MeterProvider({ readers: [reader] }));
  // The in-memory exporter keeps every span: emptied now and then so memory stays flat.
  setInterval(() => exporter.reset(), 200).unref();
}
