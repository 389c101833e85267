/**
 * One eval tool call under review ({@link EvalReview}; the mechanism is described in approval.ts):
 * the gate its host calls pass through, its pause, its replay from the journal, and the takeover
 * of a paused eval kept alive for its resume.
 *
 * LangGraph hands decisions back in the order `interrupt()` was called within the task, so every
 * reviewed call, journaled or not, calls `interrupt()` in call order; only the eval tool's own async
 * context may call it (host callbacks run in the sandbox's), so host calls queue their reviews here
 * and {@link EvalReview.drive} raises them.
 */
import type { Decision, HITLRequest } from "langchain";
import { WallHold, type ConsoleEntry, type Sandbox } from "../index.js";
import { APPROVAL_TEXT, DURABLE_TEXT } from "./prompts.js";
import { CallJournal, DurableCalls, type Replay } from "./call-journal.js";
import type { Approval, HostCallGate, ReplayStartHolder } from "./approval.js";
import type { ResolvedOptions, ResolvedReview } from "./options.js";
import type { EvalRunConfig, PtcToolView } from "./ptc.js";
import { decisionOf, EVERY_DECISION, freshClock, freshSeed, hitlRequestOf, unfaithfulPartOf } from "./review-args.js";
import {
  answerOf,
  decisionsGiven,
  errorOutcome,
  guestError,
  ReplayDivergenceError,
  REJECTED_ERROR_NAME,
  sameCall,
  SettleOrder,
  UNAVAILABLE_ERROR_NAME,
  type GuestAnswer,
} from "./review-answers.js";
import { holdsCalls, nextReviewPhase, type ReviewEvent, type ReviewPhase } from "./review-lifecycle.js";
import {
  checkpointerRecords,
  codeDigestOf,
  heldEntry,
  ReplayRecordError,
  type HostCallOutcome,
  type HostCallRequest,
  type JournalEntry,
  type PositionedCall,
  type RecordBinding,
  type ReplayRecord,
} from "./journal.js";

/** How an eval ended, for the eval tool: its outcome, or paused for review. */
export type ReviewedResult<T> = T | "paused";

let langgraph: Promise<typeof import("@langchain/langgraph")> | undefined;
type LangGraph = typeof import("@langchain/langgraph");

/** A review waiting for the eval tool to raise it. */
interface PendingAsk {
  hitl: HITLRequest;
  request: HostCallRequest;
  review: ResolvedReview;
  position: number;
  resolve: (decision: Decision) => void;
  reject: (error: Error) => void;
}

/** A session as the driver sees it. */
interface ReviewedSession {
  readonly state: ReplayStartHolder;
  discard(): void;
}

/** What `start` pins for the eval run. */
export interface PinnedRun {
  clockMs?: number;
  randomSeed: number;
  signal: AbortSignal;
  wallHold: WallHold;
  onConsole: (entry: ConsoleEntry) => void;
}

/** One eval tool call under review: the host-call gate, the pause, the replay. */
export class EvalReview implements HostCallGate {
  readonly #approval: Approval;
  readonly #options: ResolvedOptions;
  #config: EvalRunConfig;
  readonly #code: string;
  readonly #binding: RecordBinding;
  readonly #abort = new AbortController();
  readonly #asks: PendingAsk[] = [];
  readonly #inFlight = new Set<Promise<unknown>>();
  /** Calls that settled in this run (live, or answered from the journal), in the order they settled. */
  readonly #settled: JournalEntry[] = [];
  /** The journal of a resumed eval by call position, with each entry's place in the settle order. */
  readonly #journal = new Map<number, { entry: JournalEntry; turn: number }>();
  /** Journaled answers wait for their turn, so they settle as they did. */
  readonly #turns = new SettleOrder();
  #wake: (() => void) | undefined;
  #order: Promise<unknown> = Promise.resolve();
  #record: Replay | undefined;
  /** The journal written as calls complete, when the run has a checkpointer (call-journal.ts). */
  readonly #durable = new DurableCalls((error) => this.#abort.abort(error));
  #startSnapshot: Uint8Array | undefined;
  #clockMs: number | undefined;
  #randomSeed = 0;
  #consoleLines = 0;
  #cannotPause: string | undefined;
  #next = 0;
  #reachedPause = false;
  #phase: ReviewPhase = "running"; // changed only by #apply: see review-lifecycle.ts
  /** The reviewed call the eval paused at (Pausing, Paused, and Ended after a pause). */
  #pausedAt: PositionedCall | undefined;
  #diverged: ReplayDivergenceError | undefined; // why a replay was stopped (Diverged)
  #pauses = 0;
  /** The running eval, as `drive` awaits it; it outlives a run that paused when kept alive. */
  #evaluation: Promise<{ result: unknown } | { error: unknown }> | undefined;
  /** The review raised when the eval paused, raised again by the run that takes it over. */
  #pausedAsk: PendingAsk | undefined;
  /** Released when a kept-alive eval is taken over: calls made while it was paused wait for it. */
  #held: { until: Promise<void>; release: () => void } | undefined;
  /** Suspends the eval's wall budget while a human decides. */
  readonly #wall = new WallHold();
  #unforward: (() => void) | undefined;
  readonly #resumers: ((config: EvalRunConfig) => void)[] = [];

  constructor(
    approval: Approval,
    options: ResolvedOptions,
    config: EvalRunConfig,
    code: string,
    binding: RecordBinding,
  ) {
    this.#approval = approval;
    this.#options = options;
    this.#config = config;
    this.#code = code;
    this.#binding = binding;
  }

  /** After a paused run: the session goes back to the eval's start state, whether it resumes or not. */
  park(session: ReviewedSession): "paused" {
    session.discard();
    session.state.replayStart = this.#startSnapshot;
    return "paused";
  }

  /** True once the eval stopped at a reviewed call (until a takeover lets it go on). */
  get paused(): boolean {
    return this.#pausedAt !== undefined;
  }

  /** Where this eval is in its lifecycle (review-lifecycle.ts). */
  get phase(): ReviewPhase {
    return this.#phase;
  }

  /** Moves to the phase after `event`; false, changing nothing, when this phase cannot take it. */
  #apply(event: ReviewEvent): boolean {
    const next = nextReviewPhase(this.#phase, event);
    if (next === undefined) return false;
    this.#phase = next;
    return true;
  }

  /**
   * Runs the eval (`run`, given this gate) and raises its reviews; returns its outcome, or throws
   * LangGraph's interrupt once the pause is stored. `fail` turns a message into a failed outcome.
   */
  async drive<T extends { ok: boolean; text: string }>(
    session: ReviewedSession,
    run: (gate: EvalReview) => Promise<ReviewedResult<T>>,
    fail: (text: string) => T,
  ): Promise<T> {
    langgraph ??= import("@langchain/langgraph");
    const lg = await langgraph;
    const given = decisionsGiven(this.#config);
    const kept = session.state.pausedEval;
    if (given > 0) {
      let record: ReplayRecord | undefined;
      try {
        record = await checkpointerRecords.load(
          this.#config,
          this.#binding.evalCallId,
          given - 1,
          this.#binding,
          this.#options.maxSnapshotBytes,
        );
        if (record === undefined) throw new ReplayRecordError("no journal was stored for this eval call");
        if (record.codeDigest !== codeDigestOf(this.#code))
          throw new ReplayRecordError("the journal belongs to other code");
        this.#record = record;
        this.#pauses = given;
      } catch (err) {
        await kept?.stop();
        // Without the journal, running again would repeat every call made before the pause.
        return fail(APPROVAL_TEXT.noJournal(err instanceof Error ? err.message : String(err)));
      }
      if (kept?.resumableBy(this.#binding, given, record) === true)
        return kept.#takeOver(session, this.#config, given, record, fail, lg);
    }
    if (this.#options.durableEvals && CallJournal.available(this.#config)) {
      this.#durable.open(this.#config, this.#binding, given, this.#options.maxSnapshotBytes);
      try {
        this.#record = await this.#durable.resume(this.#code, this.#record);
      } catch (err) {
        await kept?.stop();
        // Without the journal, running again would repeat every call the interrupted run made.
        return fail(DURABLE_TEXT.noJournal(err instanceof Error ? err.message : String(err)));
      }
    }
    await kept?.stop();
    if (this.#record !== undefined) {
      for (const [turn, entry] of this.#record.entries.entries()) this.#journal.set(entry.position, { entry, turn });
      session.discard();
      session.state.replayStart = this.#record.startSnapshot;
    }
    this.#approval.running(this, true);
    const evaluation = run(this).then(
      // Its last calls are stored before the eval tool returns: a crash before LangGraph keeps its
      // result then replays them from the journal.
      async (result) => ({
        result: await this.#durable.stored().then(
          () => result,
          () => result,
        ),
      }),
      (error: unknown) => ({ error }),
    );
    this.#evaluation = evaluation;
    void evaluation.then(() => {
      this.#apply("end");
      this.#approval.running(this, false);
      this.#unforward?.();
      this.#approval.forget(this);
      if (session.state.pausedEval === this) session.state.pausedEval = undefined;
    });
    return this.#loop(session, evaluation as Promise<{ result: ReviewedResult<T> } | { error: unknown }>, fail, lg);
  }

  /**
   * Raises the eval's reviews as they come, in the eval tool's async context (LangGraph's
   * `interrupt()` reads the run from it); returns the eval's outcome, or throws the interrupt of
   * a pause once it is stored.
   */
  async #loop<T extends { ok: boolean; text: string }>(
    session: ReviewedSession,
    evaluation: Promise<{ result: ReviewedResult<T> } | { error: unknown }>,
    fail: (text: string) => T,
    { interrupt, isGraphInterrupt }: LangGraph,
  ): Promise<T> {
    for (;;) {
      const ask = this.#asks.shift();
      if (ask === undefined) {
        const woken = new Promise<undefined>((resolve) => (this.#wake = () => resolve(undefined)));
        const settled = await Promise.race([evaluation, woken]);
        if (settled === undefined) continue;
        if ("error" in settled) throw settled.error;
        return this.#finish(session, settled.result, fail);
      }
      let decision: Decision;
      try {
        decision = decisionOf(ask.request, ask.review, interrupt(ask.hitl));
      } catch (err) {
        if (!isGraphInterrupt(err)) {
          if (err instanceof TypeError) {
            // A malformed decision ends the eval with the error (the ToolNode reports it); the call did not run.
            this.#apply("refuse");
            this.#abort.abort(err);
            await evaluation;
            this.#restart(session);
            throw err;
          }
          ask.reject(
            guestError(
              UNAVAILABLE_ERROR_NAME,
              APPROVAL_TEXT.unavailable(err instanceof Error ? err.message : String(err)),
            ),
          );
          continue;
        }
        if (!(await this.#pause({ ...ask.request, position: ask.position }))) {
          // No longer running (it diverged, or ended): it cannot pause, and its outcome says why.
          const settled = await evaluation;
          if ("error" in settled) throw settled.error;
          return this.#finish(session, settled.result, fail);
        }
        let notSaved: string | undefined | null = null;
        if (this.#phase === "pausing") {
          notSaved = await this.#save();
          if (notSaved === undefined && this.#apply("keep")) {
            // Kept alive for its resume in this process; stored, so a resume anywhere else replays it.
            this.#pausedAsk = ask;
            session.state.pausedEval = this;
            this.#approval.keep(this);
            throw err;
          }
        }
        this.#abort.abort(new Error("paused for review"));
        const settled = await evaluation;
        if ("error" in settled) throw settled.error;
        // An eval that ended without awaiting the reviewed call is over: that call never ran.
        if (settled.result !== "paused") return this.#finish(session, settled.result, fail);
        notSaved ??= await this.#save();
        if (notSaved !== undefined) return fail(APPROVAL_TEXT.notPaused(notSaved));
        throw err;
      }
      ask.resolve(decision);
    }
  }

  #finish<T extends { ok: boolean; text: string }>(
    session: ReviewedSession,
    result: ReviewedResult<T>,
    fail: (text: string) => T,
  ): T {
    if (result === "paused")
      return fail(APPROVAL_TEXT.notPaused("the eval stopped at a reviewed call that was never raised"));
    // A replay that ended before reaching the call it paused at did not take the same path.
    const diverged =
      this.#diverged ??
      this.#durable.failure ??
      (this.#record?.pausedAt !== undefined && !this.#reachedPause
        ? new ReplayDivergenceError(APPROVAL_TEXT.endedEarly(this.#record.pausedAt.name))
        : undefined);
    if (diverged === undefined) return result;
    this.#restart(session);
    return { ...result, ok: false, text: `${diverged.name}: ${diverged.message}` };
  }

  /** Puts the session back to the eval's start state: what a stopped replay did is not the eval's. */
  #restart(session: ReviewedSession): void {
    if (this.#startSnapshot === undefined) return;
    session.discard();
    session.state.replayStart = this.#startSnapshot;
  }

  /**
   * Stores the replay record of this pause; returns why it could not be stored, if it could not.
   * Every call that settled before the pause is journaled, at whatever position: calls made after
   * the paused one may have finished while it waited.
   */
  async #save(): Promise<string | undefined> {
    const answered = new Set(this.#settled.map((entry) => entry.position));
    const record: ReplayRecord = {
      codeDigest: codeDigestOf(this.#code),
      clockMs: this.#clockMs,
      randomSeed: this.#randomSeed,
      consoleLines: this.#consoleLines,
      // Journaled answers this run did not reach yet keep their place after the ones it gave.
      entries: [...this.#settled, ...(this.#record?.entries.filter((entry) => !answered.has(entry.position)) ?? [])],
      pausedAt: this.#pausedAt!,
      startSnapshot: this.#startSnapshot!,
    };
    try {
      await checkpointerRecords.save(
        this.#config,
        this.#binding.evalCallId,
        this.#pauses,
        record,
        this.#binding,
        this.#options.maxSnapshotBytes,
      );
      return undefined;
    } catch (err) {
      return err instanceof Error ? err.message : String(err);
    }
  }

  /**
   * Before the run: takes the start snapshot (first run) and pins the clock and seed, so a replay
   * runs exactly the same; returns the eval options to add. `undefined` when no call of this eval
   * can pause (no reviewed tool in reach, no journal to replay): the eval runs as usual.
   */
  async start(
    sandbox: Sandbox,
    view: PtcToolView,
    taskAvailable: boolean,
    signal: AbortSignal | undefined,
    onConsole: ((entry: ConsoleEntry) => void) | undefined,
  ): Promise<PinnedRun | undefined> {
    const record = this.#record;
    if (record === undefined) {
      const reachable =
        [...view.byCamelName.values()].some((t) => this.#approval.reviewOf(t.name) !== undefined) ||
        (taskAvailable && this.#approval.reviewOf("task") !== undefined);
      if (view.byCamelName.size === 0 && !taskAvailable) this.#durable.off(); // no call to journal, no snapshot
      if (!reachable && !this.#durable.on) return undefined;
      if (!checkpointerRecords.available(this.#config)) this.#cannotPause = "this agent has no checkpointer";
      else {
        try {
          // On an executor thread: the state may be large, and this eval may be `1 + 1`.
          this.#startSnapshot = await sandbox.snapshotAsync({ maxSnapshotBytes: this.#options.maxSnapshotBytes });
        } catch (err) {
          this.#cannotPause = `the interpreter state cannot be saved (${err instanceof Error ? err.message : String(err)})`;
          // Without its start state the eval cannot be replayed: it runs unjournaled.
          this.#durable.off();
        }
      }
      this.#clockMs = freshClock(this.#options.clock);
      this.#randomSeed = freshSeed(this.#options.randomSeed, this.#binding.evalCallId);
      if (this.#startSnapshot !== undefined) this.#beginJournal(this.#startSnapshot);
    } else {
      this.#startSnapshot = record.startSnapshot;
      this.#clockMs = record.clockMs;
      this.#randomSeed = record.randomSeed;
      const known = new Set([...view.byCamelName.values()].map((t) => t.name));
      const missing = [
        ...new Set(
          [...record.entries, ...(record.pausedAt === undefined ? [] : [record.pausedAt])]
            .filter((c) => c.kind === "tool" && !known.has(c.name))
            .map((c) => c.name),
        ),
      ];
      // Stopped before it starts: without those tools the replay cannot take the same path.
      if (missing.length > 0) this.#diverge(APPROVAL_TEXT.toolsUnknown(missing));
      this.#beginJournal(record.pausedAt === undefined ? record.startSnapshot : new Uint8Array(0));
    }
    const skip = record?.consoleLines ?? 0;
    this.#forward(signal);
    return {
      ...(this.#clockMs === undefined ? {} : { clockMs: this.#clockMs }),
      randomSeed: this.#randomSeed,
      signal: this.#abort.signal,
      wallHold: this.#wall,
      // Lines written before the pause were streamed then: the replay writes them again, unstreamed.
      onConsole: (entry) => {
        if (++this.#consoleLines > skip) onConsole?.(entry);
      },
    };
  }

  /** The journal's head: written with its first batch unless it continues a stored one (call-journal.ts). */
  #beginJournal(snapshot: Uint8Array): void {
    this.#durable.begin(
      { codeDigest: codeDigestOf(this.#code), clockMs: this.#clockMs, randomSeed: this.#randomSeed },
      snapshot,
    );
  }

  async call(
    request: HostCallRequest,
    live: (args: Record<string, unknown>) => Promise<GuestAnswer>,
    onJournaled?: () => void,
  ): Promise<GuestAnswer> {
    const position = this.#next++;
    // Paused: held until the eval is taken over (or forever, when it is stopped or diverged).
    while (holdsCalls(this.#phase)) await this.#whileHalted();
    const record = this.#record;
    const journaled = this.#journal.get(position);
    const atPause = position === record?.pausedAt?.position;
    const expected = journaled?.entry ?? (atPause ? record?.pausedAt : undefined);
    if (expected === undefined) return answerOf(await this.#run(request, position, live, false));
    if (!sameCall(expected, request)) throw this.#diverge(APPROVAL_TEXT.diverged(position, expected, request));
    if (atPause) this.#reachedPause = true; // journaled too, when a process died after the decision
    if (journaled === undefined) {
      // The eval paused here: the next decision is this call's, whatever the configuration says now.
      return answerOf(await this.#run(request, position, live, true));
    }
    // Its decision is asked for again only to keep LangGraph's count of interrupts in step.
    if (journaled.entry.reviewed) await (await this.#queueReview(request, position, true))?.decision;
    await this.#turns.wait(journaled.turn);
    this.#settled.push(journaled.entry);
    onJournaled?.();
    return answerOf(journaled.entry.outcome);
  }

  /**
   * Decides whether a call waits for review (its `when`, unless `forced`) and queues its review,
   * strictly in call order: LangGraph matches decisions to `interrupt()` calls by their order.
   * Resolves to the decision to come (wrapped, so the order is not held up by the wait for it), or
   * `undefined` when the call is not reviewed.
   */
  #queueReview(
    request: HostCallRequest,
    position: number,
    forced: boolean,
  ): Promise<{ decision: Promise<Decision> } | undefined> {
    const review = this.#approval.reviewOf(request.name) ?? (forced ? EVERY_DECISION : undefined);
    if (review === undefined) return Promise.resolve(undefined);
    const toolCall = { name: request.name, args: request.args, id: this.#callId(position), type: "tool_call" as const };
    const step = this.#order.then(async () => {
      if (
        !forced &&
        review.when !== undefined &&
        !(await review.when({
          toolCall,
          tool: undefined,
          state: this.#config.state,
          runtime: this.#runtime(),
        } as never))
      )
        return undefined;
      if (this.#cannotPause !== undefined)
        throw guestError(UNAVAILABLE_ERROR_NAME, APPROVAL_TEXT.unavailable(this.#cannotPause));
      // The reviewer must see exactly what the tool would get: arguments JSON cannot show are refused.
      const unfaithful = unfaithfulPartOf(request.args);
      if (unfaithful !== undefined)
        throw guestError("TypeError", APPROVAL_TEXT.unreviewableArgs(request.name, unfaithful));
      const hitl = await hitlRequestOf(request, review, toolCall, {
        state: this.#config.state,
        runtime: this.#runtime(),
        descriptionPrefix: this.#options.interruptOn.descriptionPrefix,
      });
      // Raised by `drive`; when LangGraph has no decision for it yet, the eval pauses there.
      const decision = new Promise<Decision>((resolve, reject) =>
        this.#asks.push({ hitl, request, review, position, resolve, reject }),
      );
      this.#wake?.();
      return { decision };
    });
    this.#order = step.then(
      () => undefined,
      () => undefined,
    );
    return step;
  }

  async #run(
    request: HostCallRequest,
    position: number,
    live: (args: Record<string, unknown>) => Promise<GuestAnswer>,
    forced: boolean,
  ): Promise<HostCallOutcome> {
    const queued = await this.#queueReview(request, position, forced);
    let args = request.args;
    if (queued !== undefined) {
      const decision = await queued.decision;
      if (decision.type === "reject") {
        const outcome = errorOutcome(
          guestError(REJECTED_ERROR_NAME, decision.message ?? APPROVAL_TEXT.rejected(request.name)),
        );
        this.#journalCall(heldEntry({ ...request, position, reviewed: true, outcome }));
        return outcome;
      }
      if (decision.type === "edit") args = decision.editedAction.args;
    }
    // Not started when the eval paused meanwhile: held, never run while paused, so never run twice.
    await this.#mayStart();
    // Tracked while it runs: a pause waits for it, so its outcome is journaled and never run again.
    const running = live(args)
      .then((answer): HostCallOutcome => ({ ok: true, value: answer.value, updates: answer.updates }), errorOutcome)
      .then((outcome) => {
        this.#journalCall(heldEntry({ ...request, position, reviewed: queued !== undefined, outcome }));
        this.#inFlight.delete(running);
        return outcome;
      });
    this.#inFlight.add(running);
    return running;
  }

  /** A call settled in this run: kept for a pause's record, and appended to the journal. */
  #journalCall(entry: JournalEntry): void {
    this.#settled.push(entry);
    this.#durable.append(entry);
  }

  /**
   * Resolves when a live call may start: the eval runs (not paused), and every call that completed
   * before it is journaled. A journal that cannot be written stops the eval (a crash would then run
   * its calls again); a drain holds the call forever (the next process resumes the eval there).
   */
  async #mayStart(): Promise<void> {
    for (;;) {
      while (holdsCalls(this.#phase)) await this.#whileHalted();
      if ((await this.#durable.ready()) && !holdsCalls(this.#phase)) return;
    }
  }

  /**
   * For a drain: no call of this eval starts any more in this process; resolves once the calls in
   * flight settled and every completed call is journaled (or the journal failed).
   */
  drainStop(): Promise<void> {
    return this.#durable.drain(this.#inFlight);
  }

  /**
   * Stops at `call`: later calls are held, calls in flight settle (and are journaled), then the eval
   * is stopped. False when the eval is no longer running (it diverged, or ended): nothing changes.
   */
  async #pause(call: PositionedCall): Promise<boolean> {
    if (!this.#apply("pause")) return false;
    this.#pausedAt = call;
    let release!: () => void;
    const until = new Promise<void>((resolve) => (release = resolve));
    this.#held = { until, release };
    while (this.#inFlight.size > 0) await Promise.allSettled([...this.#inFlight]);
    // From here on the eval waits for a human: not the run's to abort, nor the wall budget's to stop.
    this.#wall.hold();
    this.#unforward?.();
    this.#unforward = undefined;
    return true;
  }

  /** Until a takeover releases a paused eval; forever for a stopped or diverged one. */
  #whileHalted(): Promise<void> {
    return this.#held?.until ?? new Promise<void>(() => {});
  }

  /** Aborts the eval when `signal` (the run's) aborts, until the eval pauses. */
  #forward(signal: AbortSignal | undefined): void {
    this.#unforward?.();
    this.#unforward = undefined;
    if (signal === undefined) return;
    const onAbort = (): void => this.#abort.abort(signal.reason);
    if (signal.aborted) return onAbort();
    signal.addEventListener("abort", onAbort, { once: true });
    this.#unforward = () => signal.removeEventListener("abort", onAbort);
  }

  /** Called with the run config of the run that takes the paused eval over, for what it bound to the first run. */
  onTakeover(listener: (config: EvalRunConfig) => void): void {
    this.#resumers.push(listener);
  }

  /** Stops this eval, paused and kept alive (its resume then replays); resolves once it ended. */
  async stop(): Promise<void> {
    this.#abort.abort(new Error("the paused eval was stopped"));
    await this.#evaluation;
  }

  /** True when the resume of `binding` that gives decision `given` (its stored `record` verified) is this kept-alive eval's. */
  resumableBy(binding: RecordBinding, given: number, record: ReplayRecord): boolean {
    const alive = this.#phase === "paused" && !this.#abort.signal.aborted && this.#pausedAsk !== undefined;
    const same =
      binding.threadId === this.#binding.threadId &&
      binding.evalCallId === this.#binding.evalCallId &&
      given - 1 === this.#pauses;
    const stored =
      record.codeDigest === codeDigestOf(this.#code) &&
      record.randomSeed === this.#randomSeed &&
      record.clockMs === this.#clockMs;
    return (
      alive &&
      same &&
      stored &&
      record.pausedAt.position === this.#pausedAt?.position &&
      record.pausedAt.name === this.#pausedAt.name
    );
  }

  /**
   * Goes on with this paused eval in the run that resumed it: the waiting call gets the decision
   * (raised again, so LangGraph answers it), held calls go on, nothing is replayed.
   */
  #takeOver<T extends { ok: boolean; text: string }>(
    session: ReviewedSession,
    config: EvalRunConfig,
    given: number,
    record: ReplayRecord,
    fail: (text: string) => T,
    lg: LangGraph,
  ): Promise<T> {
    // `resumableBy` said it is paused, in the same turn of the event loop: a refusal is a bug.
    if (!this.#apply("takeOver")) throw new Error(`EvalReview: cannot take over an eval that is ${this.#phase}`);
    this.#approval.forget(this);
    session.state.pausedEval = undefined;
    this.#config = config;
    this.#record = record;
    this.#reachedPause = true;
    this.#pauses = given;
    if (this.#durable.on) {
      // Calls from here on belong to the epoch of this decision (a crash resumes there), on a stored checkpoint.
      this.#durable.open(config, this.#binding, given, this.#options.maxSnapshotBytes, true);
      this.#beginJournal(new Uint8Array(0));
    }
    this.#forward(config.signal);
    for (const resume of this.#resumers) resume(config);
    const ask = this.#pausedAsk!;
    this.#pausedAsk = undefined;
    // LangGraph counts interrupt() calls per run of the task: the decisions given before this one
    // were this eval's earlier pauses', already used by the calls that waited for them.
    for (let i = 1; i < given; i++) lg.interrupt(ask.hitl);
    this.#asks.unshift(ask);
    this.#pausedAt = undefined;
    this.#held?.release();
    this.#held = undefined;
    this.#wall.release();
    return this.#loop(
      session,
      this.#evaluation as Promise<{ result: ReviewedResult<T> } | { error: unknown }>,
      fail,
      lg,
    );
  }

  /** Stops a replay that did not repeat its journal; returns the error to throw in guest code. */
  #diverge(message: string): ReplayDivergenceError {
    const error = new ReplayDivergenceError(message);
    if (!this.#apply("diverge")) return error;
    this.#diverged = error;
    this.#abort.abort(error);
    return error;
  }

  #callId(position: number): string {
    return `${this.#binding.evalCallId}:call:${position}`;
  }

  #runtime(): { context: unknown; store: unknown } {
    return {
      context: (this.#config as { context?: unknown }).context,
      store: (this.#config as { store?: unknown }).store,
    };
  }
}
