/**
 * The lifecycle of an eval under review (src/langchain/review-lifecycle.ts): the transitions drawn
 * there are the only ones taken; every other event is refused and leaves the phase as it was.
 */
import { describe, expect, it } from "vitest";
import { Approval } from "../../src/langchain/approval.js";
import { resolveOptions } from "../../src/langchain/options.js";
import {
  holdsCalls,
  nextReviewPhase,
  type ReviewEvent,
  type ReviewPhase,
} from "../../src/langchain/review-lifecycle.js";

const PHASES: readonly ReviewPhase[] = ["running", "pausing", "paused", "diverged", "refused", "ended"];
const EVENTS: readonly ReviewEvent[] = ["pause", "keep", "takeOver", "diverge", "refuse", "end"];

/** The diagram, written out: phase -> event -> next phase. */
const DRAWN: Readonly<Record<string, ReviewPhase>> = {
  "running pause": "pausing",
  "running diverge": "diverged",
  "running refuse": "refused",
  "running end": "ended",
  "pausing keep": "paused",
  "pausing end": "ended",
  "paused takeOver": "running",
  "paused end": "ended",
  "diverged end": "ended",
  "refused end": "ended",
};

describe("the review lifecycle", () => {
  it("takes the drawn transitions", () => {
    for (const [step, next] of Object.entries(DRAWN)) {
      const [phase, event] = step.split(" ") as [ReviewPhase, ReviewEvent];
      expect(nextReviewPhase(phase, event), step).toBe(next);
    }
  });

  it("refuses every transition not drawn", () => {
    const refused = PHASES.flatMap((phase) => EVENTS.map((event) => `${phase} ${event}`)).filter(
      (step) => !(step in DRAWN),
    );
    expect(refused).toHaveLength(PHASES.length * EVENTS.length - Object.keys(DRAWN).length);
    for (const step of refused) {
      const [phase, event] = step.split(" ") as [ReviewPhase, ReviewEvent];
      expect(nextReviewPhase(phase, event), step).toBeUndefined();
    }
  });

  it("refuses a takeover of an eval that is not paused, a keep after its eval ended, a pause after a divergence", () => {
    expect(nextReviewPhase("running", "takeOver")).toBeUndefined();
    expect(nextReviewPhase("ended", "keep")).toBeUndefined();
    expect(nextReviewPhase("diverged", "pause")).toBeUndefined();
    expect(nextReviewPhase("ended", "end")).toBeUndefined();
  });

  it("holds calls not yet started in every phase but running", () => {
    expect(PHASES.filter((phase) => !holdsCalls(phase))).toEqual(["running"]);
  });
});

describe("an EvalReview", () => {
  it("ends once its eval settled, and refuses to start a call after that: the call never runs", async () => {
    const approval = new Approval(resolveOptions({ interruptOn: { send_email: true } }));
    const review = approval.forCall({ toolCallId: "call-1" }, "1 + 1", "thread:t")!;
    expect(review.phase).toBe("running");
    const session = { state: { replayStart: undefined, pausedEval: undefined }, discard: () => {} };
    const outcome = await review.drive(
      session,
      async () => ({ ok: true, text: "2" }),
      (text) => ({ ok: false, text }),
    );
    expect(outcome).toEqual({ ok: true, text: "2" });
    expect(review.phase).toBe("ended");
    let ran = false;
    const late = review.call({ kind: "tool", name: "read_file", args: {} }, async () => {
      ran = true;
      return { value: "x", updates: [] };
    });
    const settled = await Promise.race([
      late.then(() => "settled"),
      new Promise((resolve) => setImmediate(() => resolve("held"))),
    ]);
    expect(settled).toBe("held");
    expect(ran).toBe(false);
    expect(review.phase).toBe("ended");
  });
});
