// Case (h): how much two spinning guests delay the Node event loop.
import { monitorEventLoopDelay } from "node:perf_hooks";
import { guestSource } from "../workloads/sources.js";

/** p99 and max event-loop delay (ms) while two sessions spin for `spinMs` each. */
export async function runEventLoopCase(adapter, spinMs) {
  const code = guestSource("spin.js");
  const a = await adapter.createSession();
  const b = await adapter.createSession();
  const histogram = monitorEventLoopDelay({ resolution: 1 });
  histogram.enable();
  // The monitor records a delay only from its second tick on: let it tick before blocking.
  await new Promise((resolve) => setTimeout(resolve, 10));
  const started = performance.now();
  await Promise.all([a.spin(code, spinMs), b.spin(code, spinMs)]);
  const wallMs = performance.now() - started;
  // A loop blocked until now records its delay only when the monitor's timer fires next.
  await new Promise((resolve) => setTimeout(resolve, 25));
  histogram.disable();
  a.dispose();
  b.dispose();
  return {
    status: "ok",
    p99Ms: histogram.percentile(99) / 1e6,
    maxMs: histogram.max / 1e6,
    wallMs,
    spinMs,
  };
}
