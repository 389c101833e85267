/**
 * The names, units and meanings of the metrics the OpenTelemetry consumer records (README,
 * "Observability"), apart from it so that they can be read without `@opentelemetry/api`.
 */

/** Metric names and units (OpenTelemetry conventions: seconds for durations, UCUM units). */
export const METRICS = Object.freeze({
  evalDuration: {
    name: "quickjs_native.eval.duration",
    unit: "s",
    description: "Wall-clock time of an eval, queue wait excluded.",
  },
  queueDuration: {
    name: "quickjs_native.eval.queue.duration",
    unit: "s",
    description: "Time an eval waited behind its sandbox's earlier evals.",
  },
  hostCallDuration: {
    name: "quickjs_native.host_call.duration",
    unit: "s",
    description: "Latency of a host call made from guest code, until it returned or settled.",
  },
  evals: {
    name: "quickjs_native.evals",
    unit: "{eval}",
    description: "Evals ended, by outcome code (quickjs_native.outcome).",
  },
  sandboxes: {
    name: "quickjs_native.sandbox.count",
    unit: "{sandbox}",
    description: "Sandboxes created and not disposed.",
  },
  pending: {
    name: "quickjs_native.eval.pending",
    unit: "{eval}",
    description: "Observed evals queued or running (the executor's queue depth).",
  },
  memory: {
    name: "quickjs_native.memory.usage",
    unit: "By",
    description: "Guest memory in use over live sandboxes, after each one's last eval.",
  },
});
