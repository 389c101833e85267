/**
 * What one eval did besides computing: the tool calls it made (by tool, with durations), the
 * subagents it started, and the progress events it emitted on LangGraph's custom stream while it ran.
 *
 * The writer is LangGraph's `config.writer` (what `agent.stream(..., { streamMode: "custom" })`
 * yields); events never block or fail the eval.
 */
import type { ConsoleEntry } from "../index.js";
import type { EvalOutcomeMetadata } from "./outcome.js";

/** Tag of every progress event, so a custom-stream consumer can tell ours from other writers'. */
export const PROGRESS_SOURCE = "code_interpreter";

/** Fields every progress event carries. */
interface ProgressBase {
  source: typeof PROGRESS_SOURCE;
  /** The eval tool call this event belongs to. */
  evalCallId: string;
}

/**
 * One event on LangGraph's custom stream while an eval runs: the eval starting, a PTC tool call
 * starting or ending, a console line (emitted as the guest writes it), a subagent event reported through {@link EvalActivity.emit}, and the eval's
 * outcome (the ToolMessage's `artifact`, before the ToolMessage itself).
 */
export type EvalProgressEvent =
  | (ProgressBase & { event: "eval_start" })
  | (ProgressBase & { event: "eval_end"; outcome: EvalOutcomeMetadata })
  | (ProgressBase & { event: "tool_start"; tool: string; call: number })
  | (ProgressBase & { event: "tool_end"; tool: string; call: number; durationMs: number; ok: boolean })
  | (ProgressBase & { event: "console"; level: ConsoleEntry["level"]; text: string })
  | (ProgressBase & { event: "subagent"; [detail: string]: unknown });

/** LangGraph's custom-stream writer. */
export type ProgressWriter = (chunk: unknown) => void;

/** Handle of one tool call in flight. */
export interface ToolCallHandle {
  /** Records the end of the call; later calls are ignored. */
  end(ok: boolean): void;
}

/** Counts and events of one eval. */
export class EvalActivity {
  readonly evalCallId: string;
  #writer: ProgressWriter | undefined;
  readonly #now: () => number;
  readonly #perTool = new Map<string, number>();
  readonly #inFlight = new Map<number, string>();
  readonly #cutOff: string[] = [];
  #calls = 0;
  #subagentCalls = 0;

  constructor(evalCallId: string, writer: ProgressWriter | undefined, now: () => number = () => performance.now()) {
    this.evalCallId = evalCallId;
    this.#writer = writer;
    this.#now = now;
  }

  /** Tool calls started, by tool name, in first-call order. */
  get toolCalls(): ReadonlyMap<string, number> {
    return this.#perTool;
  }

  /** Subagents started by this eval (`task()` increments it through {@link countSubagentCall}). */
  get subagentCalls(): number {
    return this.#subagentCalls;
  }

  /** Names of the tool calls still running, one entry per call. */
  get inFlight(): string[] {
    return [...this.#inFlight.values()];
  }

  /** Tools whose calls were still running when the eval ended (their signal fired first). */
  get cutOff(): readonly string[] {
    return this.#cutOff;
  }

  /**
   * Records a tool call starting and emits `tool_start`; call `end` on the handle when it settles.
   * `signal` is the call's host signal, which fires when the eval ends: a call still running then
   * is remembered in {@link cutOff}.
   */
  toolStarted(tool: string, signal?: AbortSignal): ToolCallHandle {
    const call = ++this.#calls;
    this.#perTool.set(tool, (this.#perTool.get(tool) ?? 0) + 1);
    this.#inFlight.set(call, tool);
    const started = this.#now();
    const onAbort = (): void => {
      this.#cutOff.push(tool);
    };
    signal?.addEventListener("abort", onAbort, { once: true });
    this.emit({ event: "tool_start", tool, call });
    let ended = false;
    return {
      end: (ok: boolean) => {
        if (ended) return;
        ended = true;
        signal?.removeEventListener("abort", onAbort);
        this.#inFlight.delete(call);
        this.emit({ event: "tool_end", tool, call, durationMs: Math.round(this.#now() - started), ok });
      },
    };
  }

  /** Counts a call answered from the journal of an earlier run of this eval: made, but not run again (no events). */
  countJournaled(tool: string): void {
    this.#calls++;
    this.#perTool.set(tool, (this.#perTool.get(tool) ?? 0) + 1);
  }

  /** Counts one subagent started from this eval. */
  countSubagentCall(): void {
    this.#subagentCalls++;
  }

  /** Later events go to `writer`: a paused eval was taken over by the run that resumed it. */
  rebind(writer: ProgressWriter | undefined): void {
    this.#writer = writer;
  }

  /** True when someone listens on the custom stream (then console lines are streamed live). */
  get streaming(): boolean {
    return this.#writer !== undefined;
  }

  /** Emits one console line of the eval, as the guest writes it. */
  console(entry: ConsoleEntry): void {
    this.emit({ event: "console", level: entry.level, text: entry.text });
  }

  /** Emits one event on the custom stream, tagged with this eval; a failing writer is ignored. */
  emit(event: DistributiveOmit<EvalProgressEvent, "source" | "evalCallId">): void {
    if (this.#writer === undefined) return;
    try {
      this.#writer({ source: PROGRESS_SOURCE, evalCallId: this.evalCallId, ...event });
    } catch {
      // A consumer's broken stream must not fail the guest's program.
    }
  }
}

type DistributiveOmit<T, K extends PropertyKey> = T extends unknown ? Omit<T, K> : never;
