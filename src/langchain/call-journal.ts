/**
 * The journal an eval writes as it goes, so it survives the death of its process (durable evals):
 * each host call that completes is appended, in the replay record's signed layout (journal.ts), as
 * pending writes of the checkpoint the eval's graph task runs on. A process that continues the
 * thread runs the eval tool call again; it finds this journal, replays the eval from its start
 * snapshot answering journaled calls from it (eval-review.ts), and appends where it stopped.
 *
 * Stored pieces, one epoch per decision LangGraph holds for the eval call (0 before any pause):
 * - the head, under `code-interpreter-journal:<eval call>:<epoch>:head`: code digest, clock, seed
 *   and the start snapshot, written with the first batch;
 * - batch k, under `…:<epoch>:<k>`: the calls that completed since batch k-1, in the order they
 *   settled, written in one `putWrites` (all or nothing in SQLite and Postgres).
 * Each is signed for its own storage slot and bound to the head's digest: a batch cannot be moved
 * to another eval call, epoch, position in the sequence or journal. Loading stops at the first
 * batch missing (a crash before it was written); sizes are checked against `maxSnapshotBytes` (the
 * cap of approval journals) before anything is allocated.
 *
 * Writes are asynchronous and batched; {@link CallJournal.durable} resolves once every call
 * appended before it is stored, which is what a new call waits for before it starts.
 *
 * Stored means found by a process that continues the thread, so it includes the checkpoint the
 * writes hang off. LangGraph's default durability ("async") puts a step's checkpoint in the
 * background while the step's tasks run, and a checkpointer such as PostgreSQL stores pending
 * writes before the checkpoint's own row if they come first (issue 31): a process killed then
 * leaves a journal no reader finds, since the next process resumes from the checkpoint before and
 * LangGraph makes a new one for the eval. So the first batch is stored only once the checkpoint
 * is: read back (polled) until it is there, unless it was already read. With durability "exit"
 * LangGraph stores nothing of the run before it ends, so a crash runs it again whatever the
 * journal holds: calls do not wait for the checkpoint then.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import { DURABLE_TEXT } from "./prompts.js";
import { guestError } from "./review-answers.js";
import {
  codeDigestOf,
  decodeSignedBytes,
  encodeSignedParts,
  fromBase64Pieces,
  locate,
  parseEntries,
  RECORD_CHANNEL,
  ReplayRecordError,
  slotOf,
  toBase64Pieces,
  type JournalEntry,
  type PositionedCall,
  type RecordBinding,
  type ReplayRecord,
} from "./journal.js";

/** What a journal's head holds besides the start snapshot. */
export interface CallJournalHead {
  codeDigest: string;
  clockMs: number | undefined;
  randomSeed: number;
}

/** A journal read back: its head, its start snapshot, its calls in the order they settled. */
export interface LoadedCallJournal extends CallJournalHead {
  startSnapshot: Uint8Array;
  entries: JournalEntry[];
}

/** Where the journal continues when it was loaded: the head's digest, batches and bytes stored. */
interface Continuation {
  headDigest: Buffer;
  batches: number;
  bytes: number;
}

const DIGEST_BYTES = 32;
/** How long the first batch waits for LangGraph to store the checkpoint it hangs off, at most. */
const CHECKPOINT_WAIT_MS = 60_000;
/** The longest pause between two reads of a checkpoint not stored yet (they start at 1 ms). */
const CHECKPOINT_POLL_MAX_MS = 100;

/** True when LangGraph stores the run's checkpoints only as it ends (durability "exit"). */
function storedAtExitOnly(config: RunnableConfig): boolean {
  const c = config as RunnableConfig & { durability?: unknown; checkpointDuring?: unknown };
  return c.durability === "exit" || c.checkpointDuring === false || c.configurable?.["__pregel_durability"] === "exit";
}

function taskIdOf(binding: RecordBinding, epoch: number, part: "head" | number): string {
  return `code-interpreter-journal:${binding.evalCallId}:${epoch}:${part}`;
}

/** The slot a piece is signed for: where it is stored and, for a batch, the head it belongs to. */
function slot(where: { graphNs: string; checkpointId: string }, taskId: string, head: Buffer | undefined): string {
  return head === undefined ? slotOf(where, taskId) : `${slotOf(where, taskId)}\0${head.toString("hex")}`;
}

function isHead(x: unknown): x is CallJournalHead {
  const h = x as CallJournalHead | null;
  return (
    typeof h === "object" &&
    h !== null &&
    typeof h.codeDigest === "string" &&
    (h.clockMs === undefined || Number.isFinite(h.clockMs)) &&
    Number.isSafeInteger(h.randomSeed)
  );
}

/** The journal of one eval call in one epoch, appended as calls complete. */
export class CallJournal {
  readonly #config: RunnableConfig;
  readonly #binding: RecordBinding;
  readonly #epoch: number;
  readonly #maxBytes: number;
  #head: { head: CallJournalHead; snapshot: Uint8Array } | undefined;
  #continuation: Continuation | undefined;
  readonly #pending: JournalEntry[] = [];
  #appended = 0;
  #stored = 0;
  #writing: Promise<void> | undefined;
  #failed: Error | undefined;
  /** True once the checkpoint the journal hangs off is known to be stored. */
  #anchored: boolean;
  readonly #waiters: { count: number; resolve: () => void; reject: (err: Error) => void }[] = [];

  /** `checkpointStored`: the checkpoint the run is on was read from the checkpointer (a resumed run). */
  constructor(
    config: RunnableConfig,
    binding: RecordBinding,
    epoch: number,
    maxBytes: number,
    checkpointStored = false,
  ) {
    this.#config = config;
    this.#binding = binding;
    this.#epoch = epoch;
    this.#maxBytes = maxBytes;
    this.#anchored = checkpointStored;
  }

  /** True when the run has a checkpointer to keep a journal in. */
  static available(config: RunnableConfig): boolean {
    return locate(config) !== undefined;
  }

  /**
   * The journal stored for this eval call and epoch, checked; `undefined` when none was stored (no
   * call completed, or no head was written). The journal then continues after what was read.
   */
  async load(): Promise<LoadedCallJournal | undefined> {
    const where = locate(this.#config);
    if (where === undefined) return undefined;
    const tuple = await where.saver.getTuple(where.checkpoint);
    if (tuple !== undefined) this.#anchored = true;
    const prefix = taskIdOf(this.#binding, this.#epoch, "head").slice(0, -"head".length);
    const byTask = new Map<string, unknown[]>();
    for (const [task, channel, value] of tuple?.pendingWrites ?? []) {
      if (channel !== RECORD_CHANNEL || !task.startsWith(prefix)) continue;
      const pieces = byTask.get(task) ?? [];
      pieces.push(value);
      byTask.set(task, pieces);
    }
    const headTask = taskIdOf(this.#binding, this.#epoch, "head");
    const headPieces = byTask.get(headTask);
    if (headPieces === undefined) return undefined;
    let budget = this.#maxBytes;
    const read = async (pieces: unknown[], taskId: string, head: Buffer | undefined) => {
      // The cap covers the whole journal: each piece is checked against what is left of it.
      const bytes = await fromBase64Pieces(pieces, budget).catch((err: unknown) => {
        throw err instanceof ReplayRecordError
          ? new ReplayRecordError(`the stored call journal is over maxSnapshotBytes (${this.#maxBytes})`)
          : err;
      });
      const decoded = await decodeSignedBytes(bytes, this.#binding, slot(where, taskId, head));
      budget -= bytes!.length;
      return { ...decoded, digest: bytes!.subarray(bytes!.length - DIGEST_BYTES) };
    };
    const head = await read(headPieces, headTask, undefined);
    if (!isHead(head.head) || head.entries.length !== 0)
      throw new ReplayRecordError("the stored call journal has an unexpected head");
    const entries: JournalEntry[] = [];
    const positions = new Set<number>();
    let batches = 0;
    for (;;) {
      const taskId = taskIdOf(this.#binding, this.#epoch, batches);
      const pieces = byTask.get(taskId);
      if (pieces === undefined) break;
      const batch = await read(pieces, taskId, head.digest);
      const count = (batch.head as { entryCount?: unknown } | null)?.entryCount;
      if (count !== batch.entries.length || batch.raw.length !== 0)
        throw new ReplayRecordError("the stored call journal has a batch of an unexpected shape");
      entries.push(...(await parseEntries(batch.entries, positions)));
      batches++;
    }
    this.#continuation = { headDigest: head.digest, batches, bytes: this.#maxBytes - budget };
    const { codeDigest, clockMs, randomSeed } = head.head;
    return { codeDigest, clockMs, randomSeed, startSnapshot: new Uint8Array(head.raw), entries };
  }

  /** What the head holds: written with the first batch, unless the journal was loaded (it continues). */
  begin(head: CallJournalHead, snapshot: Uint8Array): void {
    this.#head = { head, snapshot };
  }

  /** Journals a completed call; written with the next batch. */
  append(entry: JournalEntry): void {
    this.#pending.push(entry);
    this.#appended++;
    this.#writing ??= this.#flush();
  }

  /** True when every call appended so far is stored. */
  get allStored(): boolean {
    return this.#stored >= this.#appended;
  }

  /** Resolves once every call appended so far is stored; rejects when the journal cannot be written. */
  durable(): Promise<void> {
    if (this.#failed !== undefined) return Promise.reject(this.#failed);
    if (this.#stored >= this.#appended) return Promise.resolve();
    return new Promise((resolve, reject) => this.#waiters.push({ count: this.#appended, resolve, reject }));
  }

  async #flush(): Promise<void> {
    try {
      // Calls that settle together (results delivered in one batch) go in one batch; a turn of the
      // event loop here would cost each sequential call one more.
      await Promise.resolve();
      while (this.#pending.length > 0) {
        const batch = this.#pending.splice(0);
        await this.#write(batch);
        this.#stored += batch.length;
        for (const w of this.#waiters.filter((one) => one.count <= this.#stored)) {
          this.#waiters.splice(this.#waiters.indexOf(w), 1);
          w.resolve();
        }
      }
    } catch (err) {
      this.#failed =
        err instanceof ReplayRecordError
          ? err
          : new ReplayRecordError(`the call journal cannot be written (${err instanceof Error ? err.message : err})`);
      for (const w of this.#waiters.splice(0)) w.reject(this.#failed);
    } finally {
      this.#writing = undefined;
      if (this.#failed === undefined && this.#pending.length > 0) this.#writing = this.#flush();
    }
  }

  async #write(batch: JournalEntry[]): Promise<void> {
    const where = locate(this.#config);
    if (where === undefined) throw new ReplayRecordError("this run has no checkpointer to keep the journal in");
    const what = "the eval's call journal and start state";
    await this.#anchor(where);
    if (this.#continuation === undefined) {
      if (this.#head === undefined) throw new Error("CallJournal: a batch before the head");
      const taskId = taskIdOf(this.#binding, this.#epoch, "head");
      const parts = await encodeSignedParts(
        this.#head.head,
        this.#head.snapshot,
        [],
        this.#binding,
        slot(where, taskId, undefined),
        this.#maxBytes,
        what,
      );
      await this.#put(where, parts, taskId);
      const bytes = parts.reduce((n, p) => n + p.length, 0);
      this.#continuation = { headDigest: parts.at(-1)!, batches: 0, bytes };
    }
    const c = this.#continuation;
    const taskId = taskIdOf(this.#binding, this.#epoch, c.batches);
    const parts = await encodeSignedParts(
      { entryCount: batch.length },
      new Uint8Array(0),
      batch,
      this.#binding,
      slot(where, taskId, c.headDigest),
      this.#maxBytes,
      what,
      c.bytes,
    );
    await this.#put(where, parts, taskId);
    c.batches++;
    c.bytes += parts.reduce((n, p) => n + p.length, 0);
  }

  /**
   * Resolves once the checkpoint the journal hangs off is stored (see the top of this file), read
   * back with pauses from 1 ms doubling to {@link CHECKPOINT_POLL_MAX_MS}; rejects after
   * {@link CHECKPOINT_WAIT_MS} (LangGraph failed to store it: the run fails at the step's end).
   */
  async #anchor(where: NonNullable<ReturnType<typeof locate>>): Promise<void> {
    if (this.#anchored || storedAtExitOnly(this.#config)) return;
    const deadline = Date.now() + CHECKPOINT_WAIT_MS;
    for (let pause = 1; ; pause = Math.min(2 * pause, CHECKPOINT_POLL_MAX_MS)) {
      if ((await where.saver.getTuple(where.checkpoint)) !== undefined) {
        this.#anchored = true;
        return;
      }
      if (Date.now() >= deadline)
        throw new ReplayRecordError(
          `the checkpoint the eval runs on was not stored within ${CHECKPOINT_WAIT_MS / 1000} s, so a process continuing the thread would not find its journal`,
        );
      await new Promise((resolve) => setTimeout(resolve, pause));
    }
  }

  async #put(where: NonNullable<ReturnType<typeof locate>>, parts: Buffer[], taskId: string): Promise<void> {
    const pieces = await toBase64Pieces(parts);
    await where.saver.putWrites(
      where.checkpoint,
      pieces.map((piece) => [RECORD_CHANNEL, piece]),
      taskId,
    );
  }
}

/** What a run replays: a pause's record, or the journal of a run whose process died (no `pausedAt`). */
export type Replay = Omit<ReplayRecord, "pausedAt"> & { pausedAt: PositionedCall | undefined };

/** Never settles: a call held by a drain never starts in this process. */
const NEVER = new Promise<never>(() => {});

/**
 * The durable side of one eval's host calls (eval-review.ts): its journal (one per epoch), the
 * hold of a drain, and why journaling failed, if it did.
 */
export class DurableCalls {
  #journal: CallJournal | undefined;
  #draining = false;
  #failure: Error | undefined;
  readonly #stop: (error: Error) => void;

  /** `stop` ends the eval with the error when its journal cannot be written. */
  constructor(stop: (error: Error) => void) {
    this.#stop = stop;
  }

  /** Why the eval was stopped because its journal could not be written, if it was. */
  get failure(): Error | undefined {
    return this.#failure;
  }

  /** True while calls are journaled. */
  get on(): boolean {
    return this.#journal !== undefined;
  }

  /**
   * Journals the calls from here on in `epoch`'s journal; `checkpointStored`: the run's checkpoint
   * was read from the checkpointer (see {@link CallJournal}).
   */
  open(
    config: RunnableConfig,
    binding: RecordBinding,
    epoch: number,
    maxBytes: number,
    checkpointStored = false,
  ): void {
    this.#journal = new CallJournal(config, binding, epoch, maxBytes, checkpointStored);
  }

  /** Calls are no longer journaled (the eval cannot be replayed: no start state). */
  off(): void {
    this.#journal = undefined;
  }

  /**
   * `base` (a pause's record, if any) with what a run of the same code whose process died stored
   * in this epoch, after it; the journal then continues after that. Throws when it is unusable.
   */
  async resume(code: string, base: Replay | undefined): Promise<Replay | undefined> {
    const crashed = await this.#journal?.load();
    if (crashed === undefined) return base;
    if (crashed.codeDigest !== codeDigestOf(code)) throw new ReplayRecordError("the journal belongs to other code");
    if (base === undefined) return { ...crashed, consoleLines: 0, pausedAt: undefined };
    const known = new Set(base.entries.map((entry) => entry.position));
    return { ...base, entries: [...base.entries, ...crashed.entries.filter((e) => !known.has(e.position))] };
  }

  /** What the journal's head holds (see {@link CallJournal.begin}). */
  begin(head: CallJournalHead, snapshot: Uint8Array): void {
    this.#journal?.begin(head, snapshot);
  }

  append(entry: JournalEntry): void {
    this.#journal?.append(entry);
  }

  /**
   * True when a call may start now: every completed call is stored. Else waits until they are and
   * resolves false (check again). Never resolves for a drained eval; throws when the journal failed.
   */
  async ready(): Promise<boolean> {
    if (this.#journal === undefined || this.#journal.allStored) {
      if (this.#draining) await NEVER;
      return true;
    }
    await this.stored();
    return false;
  }

  /** Resolves once every completed call is journaled; else stops the eval and throws why. */
  async stored(): Promise<void> {
    try {
      await this.#journal?.durable();
    } catch (err) {
      const reason = err instanceof Error ? err.message : String(err);
      this.#failure ??= guestError("DurableEvalError", DURABLE_TEXT.notJournaled(reason));
      this.#stop(this.#failure);
      throw this.#failure;
    }
  }

  /** For a drain: no call starts any more; resolves once `inFlight` settled and is journaled. */
  async drain(inFlight: ReadonlySet<Promise<unknown>>): Promise<void> {
    this.#draining = true;
    while (inFlight.size > 0) await Promise.allSettled([...inFlight]);
    await this.#journal?.durable().catch(() => undefined);
  }
}
