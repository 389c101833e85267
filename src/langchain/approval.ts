/**
 * Human review of calls made from code (`interruptOn`), and the replay that lets a paused eval
 * resume in any process.
 *
 * - When guest code calls a reviewed tool (or `task()`), the eval pauses: calls already in flight
 *   settle, calls not yet started are held (never run), the eval is stopped, and a replay record
 *   (start snapshot, clock, seed, journal of every host call that settled, at any position, in the
 *   order they settled) is stored in the checkpointer before the eval tool raises LangGraph's
 *   `interrupt()` with the standard HITL request. A reviewed call's arguments must be plain JSON
 *   data, so the reviewer sees exactly what the tool would get (review-args.ts).
 * - On resume LangGraph runs the eval tool again. The eval re-runs from its start snapshot with the
 *   same clock and seed; each journaled call is checked against the journal and answered from it,
 *   never run again, in the order the calls settled in the run that paused; the paused call gets
 *   the reviewer's decision (approve, edit, reject); other calls run live, and a later reviewed call
 *   pauses again.
 * - A replay that calls something else, or with other arguments, at a journaled position stops the
 *   eval with a {@link ReplayDivergenceError}: nothing runs twice.
 * - In the process where it paused, the paused eval is kept alive (its wall budget held, its calls
 *   not yet started held too) until its resume comes to the same session: the resume then gives the
 *   decision to the waiting call and the same eval goes on, closures and promises intact, nothing
 *   replayed. Any other eval of the thread stops it first, and so do eviction, disposal and the cap
 *   {@link MAX_LIVE_PAUSED_EVALS}; its resume then replays as above.
 *
 * Here: the reviews of one middleware instance ({@link Approval}), the gate an eval's host calls pass
 * through, and what a session holds for a replay. One eval tool call under review is an
 * {@link EvalReview} (eval-review.ts); what its host calls answer guest code is in review-answers.ts,
 * its phases in review-lifecycle.ts, the arguments a reviewer sees in review-args.ts, the replay
 * record in journal.ts.
 */
import type { HostCallRequest } from "./journal.js";
import type { ResolvedOptions, ResolvedReview } from "./options.js";
import type { SessionPersistence } from "./persistence.js";
import type { EvalRunConfig } from "./ptc.js";
import { EvalReview } from "./eval-review.js";
import { CallJournal } from "./call-journal.js";
import type { GuestAnswer } from "./review-answers.js";

/** What an eval's host calls pass through when their calls are reviewed and journaled. */
export interface HostCallGate {
  /**
   * Answers one call: from the journal when replaying (then calls `journaled`: the call counts as
   * made, without running), else by running `live` (with the reviewer's arguments when edited) or
   * rejecting it when the reviewer rejected it.
   */
  call(
    request: HostCallRequest,
    live: (args: Record<string, unknown>) => Promise<GuestAnswer>,
    journaled?: () => void,
  ): Promise<GuestAnswer>;
}

/**
 * Most paused evals one middleware instance keeps alive (each holds its sandbox); when one more
 * pauses, the oldest is stopped, and its resume replays from the journal.
 */
export const MAX_LIVE_PAUSED_EVALS = 8;

/** Reviews of one middleware instance: which calls pause, and the per-eval driver. */
export class Approval {
  readonly #options: ResolvedOptions;
  /** Paused evals kept alive, oldest first. */
  readonly #live = new Set<EvalReview>();
  /** Evals running now (a drain stops them at their next call). */
  readonly #running = new Set<EvalReview>();
  /** Every eval tool call running now, reviewed and journaled or not. */
  readonly #evals = new Set<Promise<unknown>>();
  #draining = false;

  constructor(options: ResolvedOptions) {
    this.#options = options;
  }

  /** True when some call from code is reviewed. */
  get enabled(): boolean {
    return this.#options.interruptOn.tools.size > 0;
  }

  /** The review of calls to `name`, if they are reviewed. */
  reviewOf(name: string): ResolvedReview | undefined {
    return this.#options.interruptOn.tools.get(name);
  }

  /** Keeps `review` alive while paused; stops the oldest one over {@link MAX_LIVE_PAUSED_EVALS}. */
  keep(review: EvalReview): void {
    this.#live.add(review);
    if (this.#live.size <= MAX_LIVE_PAUSED_EVALS) return;
    const oldest = this.#live.values().next().value!;
    this.#live.delete(oldest);
    void oldest.stop();
  }

  /** `review` is no longer a paused eval kept alive (taken over, or ended). */
  forget(review: EvalReview): void {
    this.#live.delete(review);
  }

  /** `review` started (`true`) or ended running. */
  running(review: EvalReview, yes: boolean): void {
    if (yes) this.#running.add(review);
    else this.#running.delete(review);
  }

  /** Counts `evaluation` (one eval tool call) as running until it settles; returns it. */
  track<T>(evaluation: Promise<T>): Promise<T> {
    this.#evals.add(evaluation);
    const untrack = (): void => void this.#evals.delete(evaluation);
    evaluation.then(untrack, untrack);
    return evaluation;
  }

  /** True once a drain started: new evals are refused. */
  get draining(): boolean {
    return this.#draining;
  }

  /**
   * Refuses new evals; lets running ones finish until `deadlineMs`, then stops each at its next
   * host call with its journal written. Resolves with the number of evals stopped so.
   */
  async drain(deadlineMs: number): Promise<number> {
    this.#draining = true;
    // With no time left, no call starts after this one (a turn of the event loop would let one).
    if (deadlineMs > 0) {
      let timer: NodeJS.Timeout | undefined;
      const deadline = new Promise((resolve) => (timer = setTimeout(resolve, deadlineMs)));
      await Promise.race([Promise.allSettled([...this.#evals]), deadline]);
      clearTimeout(timer);
    }
    const left = [...this.#running];
    await Promise.all(left.map((review) => review.drainStop()));
    return left.length;
  }

  /**
   * The driver of one eval tool call: its reviews, and its journal when durable; `undefined` when
   * neither applies (`interruptOn` lists nothing, no checkpointer) or the call has no tool call id.
   */
  forCall(config: EvalRunConfig, code: string, threadKey: string): EvalReview | undefined {
    const evalCallId = config.toolCall?.id ?? config.toolCallId;
    const durable = this.#options.durableEvals && CallJournal.available(config);
    if ((!this.enabled && !durable) || evalCallId === undefined) return undefined;
    return new EvalReview(this, this.#options, config, code, {
      key: this.#options.snapshotSigningKey,
      threadId: threadKey,
      evalCallId,
    });
  }
}

/**
 * Restores the start state of a paused eval (`state.replayStart`, consumed) on an executor thread,
 * for the session's sandbox to open with. Throws when it cannot be restored: a replay on any other
 * state would not be the same eval.
 */
export async function restoreReplayStart(
  state: ReplayStartHolder & { persistence: SessionPersistence },
): Promise<void> {
  const bytes = state.replayStart!;
  state.replayStart = undefined;
  await state.persistence.restoreStart(bytes);
}

/** What the session must hold for a replay, set by {@link EvalReview.drive}. */
export interface ReplayStartHolder {
  /** A snapshot the session's next sandbox is restored from (the start of a paused eval). */
  replayStart: Uint8Array | undefined;
  /** The eval of this session that paused and is kept alive for its resume, if any. */
  pausedEval: EvalReview | undefined;
}
