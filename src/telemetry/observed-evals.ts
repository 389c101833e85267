/**
 * A sandbox's side of eval telemetry. An eval some consumer observes (it has an
 * {@link EvalObservation} from `observeEval`) runs through {@link ObservedEvals.run}: while it runs,
 * its host calls and the bytes it sends out are counted, and when it ends its consumer hears once how,
 * with a report even when it threw instead. For an eval nobody observes, only
 * {@link ObservedEvals.countOut} is called, and it does nothing.
 */
import { SandboxError } from "../errors.js";
import type { NativeOutcome } from "../native.js";
import type { EvalReport } from "../types.js";
import type { EvalObservation } from "./hub.js";

/** Where the host calls of the running eval are reported (the sandbox's host calls). */
interface HostCallsObserver {
  observe(observation: EvalObservation | undefined): void;
}

/** The observed evals of one sandbox: the one running, and how each ended. */
export class ObservedEvals {
  readonly #host: HostCallsObserver;
  #running: EvalObservation | undefined; // the running eval, when a telemetry consumer observes it

  constructor(host: HostCallsObserver) {
    this.#host = host;
  }

  /** Counts the bytes of `raw`, the outcome of the running eval, as sent out when it is observed. */
  countOut(raw: NativeOutcome): void {
    if (this.#running !== undefined) this.#running.bytesOut += (raw.value?.length ?? 0) + (raw.console?.length ?? 0);
  }

  /** The observed eval starts running: its host calls and output bytes are counted. */
  running(observed: EvalObservation): void {
    this.#running = observed;
    observed.running();
    this.#host.observe(observed);
  }

  /** Runs the observed eval `work` and tells its consumer how it ended; a throw is told, then thrown on. */
  run(observed: EvalObservation, work: () => EvalReport): EvalReport;
  run(observed: EvalObservation, work: () => EvalReport | Promise<EvalReport>): EvalReport | Promise<EvalReport>;
  run(observed: EvalObservation, work: () => EvalReport | Promise<EvalReport>): EvalReport | Promise<EvalReport> {
    let ran: EvalReport | Promise<EvalReport>;
    try {
      ran = work();
    } catch (err) {
      return this.#failed(observed, err);
    }
    if (!(ran instanceof Promise)) return this.#ended(observed, ran);
    return ran.then(
      (report) => this.#ended(observed, report),
      (err: unknown) => this.#failed(observed, err),
    );
  }

  // An eval some telemetry consumer observes ended with `report`: tells it.
  #ended(observed: EvalObservation, report: EvalReport): EvalReport {
    if (this.#running === observed) {
      this.#running = undefined;
      this.#host.observe(undefined);
    }
    observed.ended(report);
    return report;
  }

  // An observed eval threw `err` before it had a report: tells the consumer, and throws it on.
  #failed(observed: EvalObservation, err: unknown): never {
    this.#ended(observed, {
      ok: false,
      error: err instanceof SandboxError ? err : new SandboxError("INVALID_ARGUMENT", String(err)),
      console: [],
      consoleTruncated: false,
      stats: { executionMs: 0, wallMs: 0, hostCalls: 0, memoryUsedBytes: 0, peakMemoryBytes: 0 },
    });
    throw err;
  }
}
