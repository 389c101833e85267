/**
 * The outcome of one eval as data: status, tool and subagent calls, timings, what was cut and where
 * the full text went. The model reads it as one compact line (see `OUTPUT_TEXT.outcome`); programs
 * read it as the eval ToolMessage's `artifact`.
 */
import type { EvalReport } from "../index.js";
import type { EvalActivity } from "./activity.js";

/** How an eval ended. */
export type EvalStatus = "ok" | "error" | "timeout" | "aborted";

/** A section of the eval output whose full text was kept outside the message. */
export interface KeptOutput {
  section: "console" | "result" | "error";
  /** Where the full text is: a path in the agent's files, or in the interpreter's output store. */
  path: string;
  /** `"files"`: the agent's file system (`read_file`); `"store"`: the in-memory store (`readOutput`). */
  store: "files" | "store";
  /** Characters kept: the whole text when `complete`, else its head (the text exceeded the store's cap). */
  chars: number;
  complete: boolean;
}

/** Structured outcome of one eval, on the ToolMessage's `artifact`. */
export interface EvalOutcomeMetadata {
  status: EvalStatus;
  /** PTC tool calls started, by tool name. */
  toolCalls: Record<string, number>;
  /** Subagents started from this eval. */
  subagentCalls: number;
  /** Guest execution time, ms (awaits excluded). */
  executionMs: number;
  /** Wall-clock time of the eval, ms. */
  wallMs: number;
  /** Sections cut to fit `maxResultChars`, with where their full text is. */
  kept: KeptOutput[];
  /** The hint appended for a known mistake, if any. */
  hint?: string;
}

/** The status of a report: timeouts and aborts apart from other failures. */
export function statusOf(report: EvalReport): EvalStatus {
  if (report.ok) return "ok";
  if (report.error.code === "TIMEOUT") return "timeout";
  if (report.error.code === "ABORTED") return "aborted";
  return "error";
}

/** Assembles the structured outcome of an eval. */
export function outcomeOf(
  report: EvalReport,
  activity: EvalActivity,
  kept: readonly KeptOutput[],
  hint: string | undefined,
): EvalOutcomeMetadata {
  return {
    status: statusOf(report),
    toolCalls: Object.fromEntries(activity.toolCalls),
    subagentCalls: activity.subagentCalls,
    executionMs: Math.round(report.stats.executionMs),
    wallMs: Math.round(report.stats.wallMs),
    kept: [...kept],
    ...(hint === undefined ? {} : { hint }),
  };
}
