/**
 * The lifecycle of one eval tool call under review ({@link EvalReview} in eval-review.ts): which
 * phase it is in, and which events move it. Every change of phase goes through
 * {@link nextReviewPhase}, which refuses the events a phase cannot take.
 *
 *     Running --Pause--> Pausing --Keep--> Paused --TakeOver--> Running
 *       |  \               (calls in flight   (kept alive for its resume
 *       |   \               settle; the record in this process; its wall
 *       |    \              is stored)         budget held)
 *       |     +--Diverge--> Diverged   (a replay called something else: stopped)
 *       +--------Refuse---> Refused    (a malformed decision: stopped, the call never ran)
 *
 *     every phase but Ended --End--> Ended   (the evaluation settled: terminal)
 *
 *   Every event not drawn is refused and leaves the phase as it is: a pause, a divergence or a
 *   refusal of an eval that is no longer running (it diverged, was refused or ended), a keep of a
 *   pause whose eval ended meanwhile, a takeover of an eval that is not paused.
 *   In every phase but Running, calls not yet started are held: they never run (a takeover, back
 *   to Running, lets them go on). Ended holds them too: no call starts after its eval settled.
 *
 * Who applies what: `drive`'s loop applies Pause, Keep and Refuse (it raises the reviews);
 * `call` and `start` apply Diverge; a run that resumes the paused eval applies TakeOver; the
 * evaluation's settlement applies End.
 */

/** Where a reviewed eval is in its lifecycle (see the diagram above). */
export type ReviewPhase = "running" | "pausing" | "paused" | "diverged" | "refused" | "ended";

/** What can happen to a reviewed eval. */
export type ReviewEvent = "pause" | "keep" | "takeOver" | "diverge" | "refuse" | "end";

const TRANSITIONS: Readonly<Record<ReviewPhase, Readonly<Partial<Record<ReviewEvent, ReviewPhase>>>>> = {
  running: { pause: "pausing", diverge: "diverged", refuse: "refused", end: "ended" },
  pausing: { keep: "paused", end: "ended" },
  paused: { takeOver: "running", end: "ended" },
  diverged: { end: "ended" },
  refused: { end: "ended" },
  ended: {},
};

/** The phase after `event` in `phase`, or `undefined` when the phase cannot take the event (refused). */
export function nextReviewPhase(phase: ReviewPhase, event: ReviewEvent): ReviewPhase | undefined {
  return TRANSITIONS[phase][event];
}

/** True when calls not yet started must wait: every phase but Running holds them. */
export function holdsCalls(phase: ReviewPhase): boolean {
  return phase !== "running";
}
