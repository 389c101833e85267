/**
 * Usage records for billing and quotas: one per eval, built from the counters the eval's report
 * shows, delivered to `onUsage` after the eval's own caller has its answer (a batch per turn of the
 * event loop), never on the eval's path.
 */

/** What one eval used, for billing and quotas (the `onUsage` option). */
export interface UsageRecord {
  /** Who the eval is billed to: the eval's `tenant` option (the middleware's `usageTenant`, default the thread id), `""` when unset. */
  tenant: string;
  /** Process-wide sequence number of the eval (the same as on the diagnostics channels). */
  evalId: number;
  /** `"OK"` or the error code (`"TIMEOUT"`, `"OUT_OF_MEMORY"`, ...). */
  outcome: string;
  /** Guest CPU time, µs: the report's `stats.executionMs` × 1000. */
  cpuMicros: number;
  /** Wall-clock time, µs: the report's `stats.wallMs` × 1000. */
  wallMicros: number;
  /** Peak guest memory, bytes: the report's `stats.peakMemoryBytes`. */
  memoryPeakBytes: number;
  /** Host calls the guest made: the report's `stats.hostCalls`. */
  hostCalls: number;
  /**
   * Host calls that reached a host function, by name (the defined name such as `"tools.search"`,
   * or the tool name a PTC tool or `task()` reports). A call refused before any host function ran
   * (its arguments could not be copied) is in `hostCalls` only.
   */
  hostCallsByName: Record<string, number>;
  /** Bytes copied into the guest: the code (UTF-8) and host-call results (wire bytes; the primitive fast path's slots count 0). */
  bytesIn: number;
  /** Bytes copied out: host-call arguments, the result and the console (wire bytes; the primitive fast path's slots count 0). */
  bytesOut: number;
}

type UsageListener = (record: UsageRecord) => void;

let queued: [UsageListener, UsageRecord][] = [];
let warned = false;

function flush(): void {
  const batch = queued;
  queued = [];
  for (const [listener, record] of batch) {
    try {
      listener(record);
    } catch (err) {
      if (!warned) {
        warned = true;
        process.emitWarning(
          `quickjs-native: an onUsage listener threw (later throws are not reported): ${(err as Error)?.message ?? String(err)}`,
          "TelemetryWarning",
        );
      }
    }
  }
}

/** Queues `record` for `listener`, delivered after the current turn of the event loop. */
export function deliverUsage(listener: UsageListener, record: UsageRecord): void {
  if (queued.length === 0) setImmediate(flush);
  queued.push([listener, record]);
}
