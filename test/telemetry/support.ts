/**
 * Test support: an OpenTelemetry SDK registered for one test (in-memory span exporter, in-memory
 * metric reader, AsyncLocalStorage context manager), removed after it.
 */
import { context, metrics, trace } from "@opentelemetry/api";
import { AsyncLocalStorageContextManager } from "@opentelemetry/context-async-hooks";
import {
  AggregationTemporality,
  InMemoryMetricExporter,
  MeterProvider,
  PeriodicExportingMetricReader,
} from "@opentelemetry/sdk-metrics";
import {
  BasicTracerProvider,
  InMemorySpanExporter,
  type ReadableSpan,
  SimpleSpanProcessor,
} from "@opentelemetry/sdk-trace-base";

export interface OtelHarness {
  spans(): ReadableSpan[];
  /** Data points of the metric `name` after a collection: [attributes, value or histogram count]. */
  metric(name: string): Promise<[Record<string, unknown>, number][]>;
  close(): Promise<void>;
}

export function registerOtel(): OtelHarness {
  const exporter = new InMemorySpanExporter();
  const tracerProvider = new BasicTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
  trace.setGlobalTracerProvider(tracerProvider);
  const contextManager = new AsyncLocalStorageContextManager().enable();
  context.setGlobalContextManager(contextManager);
  const metricExporter = new InMemoryMetricExporter(AggregationTemporality.CUMULATIVE);
  const reader = new PeriodicExportingMetricReader({ exporter: metricExporter, exportIntervalMillis: 3_600_000 });
  const meterProvider = new MeterProvider({ readers: [reader] });
  metrics.setGlobalMeterProvider(meterProvider);
  return {
    spans: () => exporter.getFinishedSpans(),
    async metric(name) {
      metricExporter.reset();
      await reader.forceFlush();
      const points: [Record<string, unknown>, number][] = [];
      for (const rm of metricExporter.getMetrics()) {
        for (const sm of rm.scopeMetrics) {
          for (const m of sm.metrics) {
            if (m.descriptor.name !== name) continue;
            for (const p of m.dataPoints)
              points.push([p.attributes, typeof p.value === "number" ? p.value : (p.value as { count: number }).count]);
          }
        }
      }
      return points;
    },
    async close() {
      await meterProvider.shutdown();
      await tracerProvider.shutdown();
      trace.disable();
      metrics.disable();
      context.disable();
      contextManager.disable();
    },
  };
}

/** The parent span id of `span` (SDK 2.x names it parentSpanContext). */
export function parentOf(span: ReadableSpan): string | undefined {
  return span.parentSpanContext?.spanId;
}
