/**
 * What the host calls of a reviewed eval answer guest code, and how a replay recognises them: an
 * outcome becomes the call's value or the error it throws in guest code (a rejected call, a review
 * that cannot pause, a replay that diverged from its journal), a replayed call is checked against
 * its journal entry, and the reviewer's decisions LangGraph holds are counted (eval-review.ts).
 */
import { isDeepStrictEqual } from "node:util";
import { deserialize, serialize } from "node:v8";
import type { HostCallOutcome, HostCallRequest } from "./journal.js";
import type { EvalRunConfig, StateUpdate } from "./ptc.js";

/** What a host call gives guest code: its value, and graph-state writes requested by the tool. */
export interface GuestAnswer {
  value: unknown;
  updates: StateUpdate[];
}

/**
 * A resumed eval did not repeat its journal: another call, other arguments, or an end before the
 * paused call. The eval is stopped; no call after the divergence ran.
 */
export class ReplayDivergenceError extends Error {
  override readonly name = "ReplayDivergenceError";
}

/** Raised in guest code when the reviewer rejected the call; `message` is the reviewer's. */
export const REJECTED_ERROR_NAME = "ToolCallRejectedError";
/** Raised in guest code when a reviewed call cannot pause (no checkpointer, start state too large). */
export const UNAVAILABLE_ERROR_NAME = "ApprovalUnavailableError";

// LangGraph's run-config key of the task's scratchpad (CONFIG_KEY_SCRATCHPAD): resume values given so far.
const SCRATCHPAD_KEY = "__pregel_scratchpad";

/** Decisions LangGraph holds for the running task: resumed values, plus a fresh one not yet consumed. */
export function decisionsGiven(config: EvalRunConfig): number {
  const pad = (config.configurable as Record<string, unknown> | undefined)?.[SCRATCHPAD_KEY] as
    | { resume?: unknown; nullResume?: unknown }
    | undefined;
  if (pad === undefined) return 0;
  return (Array.isArray(pad.resume) ? pad.resume.length : 0) + (pad.nullResume === undefined ? 0 : 1);
}

/** An error for guest code: `name` and `message` only, no host stack. */
export function guestError(name: string, message: string): Error {
  const error = new Error(message);
  error.name = name;
  error.stack = `${name}: ${message}`;
  return error;
}

/** What guest code gets for `outcome`: its value, or its error thrown. */
export function answerOf(outcome: HostCallOutcome): GuestAnswer {
  if (!outcome.ok) throw guestError(outcome.error.name, outcome.error.message);
  return { value: outcome.value, updates: outcome.updates };
}

/** The outcome of a call that failed with `err`. */
export function errorOutcome(err: unknown): HostCallOutcome {
  const e = err instanceof Error ? err : new Error(String(err));
  return { ok: false, error: { name: e.name, message: e.message } };
}

/**
 * True when a replayed call is the journaled one: same tool, and the same arguments once they
 * take the journal's round trip (which gives a null-prototype object `Object.prototype`).
 */
export function sameCall(expected: HostCallRequest, actual: HostCallRequest): boolean {
  if (expected.kind !== actual.kind || expected.name !== actual.name) return false;
  try {
    return isDeepStrictEqual(expected.args, deserialize(serialize(actual.args)));
  } catch {
    return false;
  }
}

/** Gives journaled answers in the order they settled in the run that was journaled. */
export class SettleOrder {
  #delivered = 0;
  readonly #turns = new Map<number, () => void>();

  /**
   * Waits until every journaled answer that settled before this one (`turn`) was given, then
   * gives the next one its turn a macrotask later: `Promise.race` over replayed calls settles as
   * it did in the run that was journaled.
   */
  async wait(turn: number): Promise<void> {
    if (turn !== this.#delivered) await new Promise<void>((resolve) => this.#turns.set(turn, resolve));
    const next = ++this.#delivered;
    setImmediate(() => {
      this.#turns.get(next)?.();
      this.#turns.delete(next);
    });
  }
}
