/**
 * Interpreter state kept with the thread (mode "thread") and rollback to the last good state.
 *
 * - After each agent run (`afterAgent`) the thread's sandbox is snapshotted, signed with
 *   `snapshotSigningKey` when given (bound to the thread id and a turn counter kept beside it).
 *   When the agent has a `store`, the snapshot goes there as content-addressed chunks
 *   (thread-blobs.ts) and a private key of the middleware's state schema holds only its turn and
 *   reference: checkpointers write every channel at every super-step, so graph state must stay
 *   small, and a turn then stores only the chunks it changed. Without a store the same chunks go
 *   to the run's checkpointer (checkpointer-blobs.ts), and without either (no checkpointer: nothing
 *   outlives the run anyway) the deflated snapshot itself sits in that key. Either way time travel
 *   brings back the matching state. A snapshot whose body did not change is not written again.
 * - Before a run (`beforeAgent`), a thread whose live session does not hold that stored turn (a new
 *   process, another replica, an evicted session, time travel) is restored from it on its next eval.
 * - After every eval that completed (returned a value or threw), an unsigned in-memory snapshot,
 *   written by the eval's own executor job, is kept as the last good state; an eval stopped by a
 *   timeout, out of memory, the watchdog or an abort puts it back, so no half-mutated globals
 *   survive.
 * Whatever is lost on the way is told to the model in one line, on its next eval.
 */
import type { BaseStore } from "@langchain/langgraph";
import { z } from "zod";
import {
  resealSnapshot,
  Sandbox,
  SandboxError,
  snapshotBody,
  type EvalReport,
  type NotRestored,
  type RestoreOptions,
  type SandboxErrorCode,
  type SandboxIsolation,
  type SandboxOptions,
  type SnapshotOptions,
} from "../index.js";
import type { ResolvedOptions } from "./options.js";
import { PERSISTENCE_TEXT } from "./prompts.js";
import { type CheckpointerBlobs, checkpointerOf } from "./checkpointer-blobs.js";
import { sha256HexInSlices } from "./slices.js";
import { type BlobBackend, ThreadBlobs } from "./thread-blobs.js";

/** Graph-state key holding the snapshot; the leading underscore keeps it out of the agent's output. */
export const SNAPSHOT_STATE_KEY = "_codeInterpreterSnapshot";

const storedSnapshot = z.object({
  /** Turn counter the snapshot is signed for; increases with every stored change. */
  turn: z.number().int().nonnegative(),
  /** The snapshot, base64 (every checkpointer serializer keeps strings), when kept in graph state (no store). */
  data: z.string().optional(),
  /** Reference of the snapshot in the agent's store (see thread-blobs.ts), when kept there. */
  ref: z.string().optional(),
  /** Set when `ref` is kept in the run's checkpointer (an agent without a store; checkpointer-blobs.ts), not in the store. */
  at: z.literal("checkpointer").optional(),
  /** One line for the model when the state could not be stored (read on the next run, in any process). */
  notice: z.string().optional(),
});

/** A thread's stored interpreter state, as graph state holds it. */
export type StoredSnapshot = z.infer<typeof storedSnapshot>;

/**
 * Snapshots a thread keeps in the store: older ones are collected with their unshared chunks, so
 * time travel further back than this many stored changes finds no state (the model is told).
 */
export const KEPT_SNAPSHOTS_PER_THREAD = 8;

/** The middleware's state schema: one private key. */
export const persistenceStateSchema = z.object({ [SNAPSHOT_STATE_KEY]: storedSnapshot.optional() });

/** Where a run can keep blobs: the agent's store, else the run's checkpointer. */
export interface RunStorage {
  store: BaseStore | undefined;
  checkpointer: CheckpointerBlobs | undefined;
}

/** The run's storage, from what a node or tool is given: `store`, and its config's `configurable`. */
export function runStorageOf(
  store: BaseStore | undefined,
  configurable: Record<string, unknown> | undefined,
): RunStorage {
  return { store, checkpointer: checkpointerOf(configurable) };
}

/** A snapshot waiting to be restored into the session's next sandbox. */
export interface PendingRestore {
  bytes?: Uint8Array;
  /** Store reference of a snapshot kept in the store (or the checkpointer), read by `load`. */
  ref?: string;
  /** True when `ref` is kept in the checkpointer. */
  inCheckpointer?: boolean;
  /** The read under way, and the store or checkpointer it reads from (each agent run hands nodes a store of its own). */
  reading?: { from: object; done: Promise<void> };
  /** Why the read failed; the sandbox opens fresh and says so. */
  unreadable?: unknown;
  turn?: number;
  what: "stored" | "rollback";
}

/**
 * What a session keeps for persistence and rollback. Only {@link SessionPersistence} holds one, and
 * only {@link Persistence} reads or writes it: other files call the session's methods.
 */
export interface PersistenceState {
  /** Where the session's sandboxes live, chosen when the session was created (the `isolation` option). */
  isolation: SandboxIsolation;
  /** Turn of the stored snapshot the live sandbox started from or last wrote; -1 when none. */
  turn: number;
  /** Snapshot to restore from when the session next opens a sandbox: its bytes, or its store reference until `load`. */
  pending: PendingRestore | undefined;
  /** Digest of the snapshot body at `turn` when it is kept in the store, to skip writing an unchanged state. */
  storedBody: string | undefined;
  /** In-memory snapshot after the last completed eval (or the stored state the sandbox was restored from), for rollback. */
  lastGood: Uint8Array | undefined;
  /** The turn `lastGood` is signed for, when it is a stored snapshot; undefined for an unsigned in-memory one. */
  lastGoodTurn: number | undefined;
  /** The sandbox `lastGood` was taken of: while it is the live one, its state is `lastGood`'s (evals update or roll back both). */
  lastGoodOf: Sandbox | undefined;
  /** One-line notices for the model's next eval. */
  notices: string[];
  /** The sandbox `restore` made from `pending` on an executor thread, for the next `open` to take. */
  restored: Sandbox | undefined;
}

function initPersistenceState(isolation: SandboxIsolation): PersistenceState {
  return {
    isolation,
    turn: -1,
    pending: undefined,
    storedBody: undefined,
    lastGood: undefined,
    lastGoodTurn: undefined,
    lastGoodOf: undefined,
    notices: [],
    restored: undefined,
  };
}

/** The snapshot stored in a graph state, if there is one of the expected shape. */
export function storedSnapshotOf(state: unknown): StoredSnapshot | undefined {
  if (typeof state !== "object" || state === null) return undefined;
  const parsed = storedSnapshot.safeParse((state as Record<string, unknown>)[SNAPSHOT_STATE_KEY]);
  return parsed.success ? parsed.data : undefined;
}

/** Engine stops after which the sandbox may hold half-mutated globals. */
const STOPS: ReadonlySet<SandboxErrorCode> = new Set(["TIMEOUT", "OUT_OF_MEMORY", "BROKEN", "ABORTED", "WORKER_LOST"]);

function isStop(code: SandboxErrorCode): boolean {
  return STOPS.has(code);
}

function reasonOf(error: unknown): string {
  if (error instanceof SandboxError) return `${error.code}: ${error.message}`;
  return error instanceof Error ? error.message : String(error);
}

/** Snapshots and restores a session's sandbox according to the middleware's options. */
export class Persistence {
  readonly #options: ResolvedOptions;
  readonly #sandboxOptions: SandboxOptions;

  constructor(options: ResolvedOptions, sandboxOptions: SandboxOptions) {
    this.#options = options;
    this.#sandboxOptions = sandboxOptions;
  }

  /** True when state outlives a run (mode "thread"). */
  get storesThread(): boolean {
    return this.#options.mode === "thread";
  }

  /** The persistence of one session, whose sandboxes live in `isolation`: its state, behind methods. */
  forSession(isolation: SandboxIsolation): SessionPersistence {
    return new SessionPersistence(this, initPersistenceState(isolation));
  }

  /** True when evals share a sandbox, so a stopped eval has a state to roll back to. */
  get rollsBack(): boolean {
    return this.#options.mode !== "call";
  }

  #signing(threadId: string, turn: number): RestoreOptions["signing"] {
    const key = this.#options.snapshotSigningKey;
    return key === undefined ? undefined : { key, threadId, turn };
  }

  /**
   * Restores `pending` into a new sandbox on an executor thread (re-created functions and classes
   * run guest code, which never runs on the Node main thread), for the next `open` to take. When
   * the restore fails, the state is forgotten and the model is told why. `threadId` is what the
   * signature is bound to.
   */
  async restore(state: PersistenceState, threadId: string): Promise<void> {
    const pending = state.pending;
    if (pending === undefined) return;
    state.pending = undefined;
    if (pending.bytes === undefined) {
      this.#forget(
        state,
        pending.what,
        pending.unreadable ??
          new SandboxError("INVALID_SNAPSHOT", "the state is kept in the agent's store, and it was not read"),
      );
      return;
    }
    const signing = pending.turn === undefined ? undefined : this.#signing(threadId, pending.turn);
    try {
      const { sandbox, notRestored } = await Sandbox.restoreAsync(pending.bytes, {
        ...this.#sandboxOptions,
        isolation: state.isolation,
        maxSnapshotBytes: this.#options.maxSnapshotBytes,
        ...(signing === undefined ? {} : { signing }),
      });
      if (notRestored.length > 0)
        state.notices.push(PERSISTENCE_TEXT.notRestored(notRestored.map((n: NotRestored) => `${n.name} (${n.type})`)));
      if (pending.ref !== undefined) state.storedBody = await bodyDigest(pending.bytes);
      if (pending.what === "stored") {
        // Until an eval completes, a stop goes back to the state just restored.
        state.lastGood = pending.bytes;
        state.lastGoodTurn = pending.turn;
        state.lastGoodOf = sandbox;
      } else if (pending.bytes === state.lastGood) {
        state.lastGoodOf = sandbox; // rolled back: the sandbox holds the last good state again
      }
      dropRestored(state);
      state.restored = sandbox;
    } catch (error) {
      this.#forget(state, pending.what, error);
    }
  }

  /**
   * Restores the start state of a paused eval on an executor thread, in place of whatever the
   * session was about to restore, for the next `open` to take. Throws when it cannot be restored: a
   * replay on any other state would not be the same eval.
   */
  async restoreStart(state: PersistenceState, bytes: Uint8Array): Promise<void> {
    state.pending = undefined;
    dropRestored(state);
    const { sandbox, notRestored } = await Sandbox.restoreAsync(bytes, {
      ...this.#sandboxOptions,
      isolation: state.isolation,
      maxSnapshotBytes: this.#options.maxSnapshotBytes,
    });
    if (notRestored.length > 0)
      state.notices.push(PERSISTENCE_TEXT.notRestored(notRestored.map((n: NotRestored) => `${n.name} (${n.type})`)));
    state.restored = sandbox;
  }

  /** Opens the session's sandbox: the one `restore` made, or a fresh one. */
  open(state: PersistenceState): Sandbox {
    const restored = state.restored;
    state.restored = undefined;
    return restored ?? new Sandbox({ ...this.#sandboxOptions, isolation: state.isolation });
  }

  /** Forgets the state that could not be restored and tells the model: the sandbox opens fresh. */
  #forget(state: PersistenceState, what: "stored" | "rollback", error: unknown): void {
    state.turn = -1;
    state.storedBody = undefined;
    state.notices.push(PERSISTENCE_TEXT.restoreFailed(what, reasonOf(error)));
  }

  /**
   * Reads a pending snapshot kept in `store`, so the session's next sandbox can be restored from
   * it. Called before a run's first eval opens the sandbox, and already by `beforeAgent` without
   * waiting, so the store read overlaps the model call. A state that cannot be read (no store,
   * collected, a chunk missing or altered) stays pending with the reason: the sandbox then opens
   * fresh and the model is told once.
   */
  async load(state: PersistenceState, storage: RunStorage, threadId: string): Promise<void> {
    const pending = state.pending;
    if (pending?.ref === undefined || pending.bytes !== undefined || pending.unreadable !== undefined) return;
    const from = pending.inCheckpointer === true ? storage.checkpointer : storage.store;
    if (from === undefined) {
      pending.unreadable = new SandboxError(
        "INVALID_SNAPSHOT",
        pending.inCheckpointer === true
          ? "the state is kept in the checkpointer, and this run has none"
          : "the state is kept in a store, and this agent was given none",
      );
      return;
    }
    // A read started in an earlier run used that run's store, which may have stopped before answering.
    const source = "saver" in from ? from.saver : from;
    if (pending.reading?.from !== source) pending.reading = { from: source, done: this.#read(pending, from, threadId) };
    await pending.reading.done;
  }

  async #read(pending: PendingRestore, from: BlobBackend, threadId: string): Promise<void> {
    try {
      pending.bytes = await new ThreadBlobs(from, threadId, "snapshot", KEPT_SNAPSHOTS_PER_THREAD).read(
        pending.ref!,
        this.#options.maxSnapshotBytes,
      );
    } catch (error) {
      pending.unreadable = error;
    }
  }

  /** Before a run: arranges a restore when the live session does not hold the stored turn. Returns true when the live sandbox must be dropped. */
  prepare(state: PersistenceState, stored: StoredSnapshot | undefined, live: boolean): boolean {
    if (stored === undefined) return false;
    if (stored.notice !== undefined && stored.turn !== state.turn) state.notices.push(stored.notice);
    if ((stored.data === undefined && stored.ref === undefined) || (live && stored.turn === state.turn)) {
      state.turn = stored.turn;
      return false;
    }
    dropRestored(state);
    forgetLastGood(state); // the live sandbox's, not the stored state's
    state.pending =
      stored.data !== undefined
        ? { bytes: Buffer.from(stored.data, "base64"), turn: stored.turn, what: "stored" }
        : {
            ref: stored.ref!,
            turn: stored.turn,
            what: "stored",
            ...(stored.at === "checkpointer" ? { inCheckpointer: true } : {}),
          };
    state.turn = stored.turn;
    state.storedBody = undefined;
    return true;
  }

  /**
   * On an eval whose session has no sandbox and was never prepared by `beforeAgent` in this
   * process (evicted mid-run, or a new session object): arranges a restore from the graph state
   * the eval sees. `evicted` says why a live sandbox went away, for the model.
   */
  prepareOnEval(state: PersistenceState, graphState: unknown, evicted: "idle" | "capacity" | undefined): void {
    if (!this.storesThread || state.turn !== -1 || state.pending !== undefined) return;
    const stored = storedSnapshotOf(graphState);
    if (stored?.data === undefined && stored?.ref === undefined) return;
    this.prepare(state, stored, false);
    if (evicted !== undefined) state.notices.push(PERSISTENCE_TEXT.evicted(evicted));
  }

  /**
   * After a run: the graph-state update storing the sandbox's snapshot, or `undefined` when nothing
   * changed. With a `store`, the snapshot's chunks go there and graph state gets its reference;
   * without one, graph state gets the snapshot. A snapshot over `maxSnapshotBytes`, or one the
   * store refused, is not stored; the stored one is cleared so a later restore cannot bring back
   * an outdated state, and the model is told.
   */
  async store(
    state: PersistenceState,
    sandbox: Sandbox | undefined,
    stored: StoredSnapshot | undefined,
    threadId: string,
    storage: RunStorage = { store: undefined, checkpointer: undefined },
  ): Promise<StoredSnapshot | undefined> {
    // Without a store, the chunks go to the run's checkpointer; graph state holds the reference either way.
    const backend: BlobBackend | undefined = storage.store ?? storage.checkpointer;
    const at = storage.store === undefined ? "checkpointer" : undefined;
    if (sandbox === undefined || sandbox.disposed) return undefined;
    const turn = (stored?.turn ?? 0) + 1;
    const signing = this.#signing(threadId, turn);
    const notStored = (error: unknown): StoredSnapshot => {
      const notice = PERSISTENCE_TEXT.notStored(reasonOf(error));
      state.notices.push(notice);
      state.turn = turn;
      state.storedBody = undefined;
      return { turn, notice };
    };
    let bytes: Uint8Array;
    try {
      // Chunks are deflated one by one in the store; graph state is written by every checkpoint, so
      // a snapshot kept there is deflated whole (records of one shape shrink several times).
      const options = {
        maxSnapshotBytes: this.#options.maxSnapshotBytes,
        compress: backend === undefined,
        ...(signing === undefined ? {} : { signing }),
      };
      // The state after the run's last eval was already taken for rollback: sealing it for this
      // turn costs a digest and a signature, not another walk of the interpreter.
      const from = state.lastGoodTurn === undefined ? undefined : this.#signing(threadId, state.lastGoodTurn);
      bytes =
        state.lastGood !== undefined && state.lastGoodOf === sandbox
          ? await resealSnapshot(state.lastGood, { ...options, ...(from === undefined ? {} : { from }) })
          : await sandbox.snapshotAsync(options);
    } catch (error) {
      return notStored(error);
    }
    if (backend === undefined) {
      if (stored?.data !== undefined && sameBody(Buffer.from(stored.data, "base64"), bytes)) {
        state.turn = stored.turn;
        return undefined;
      }
      state.turn = turn;
      return { turn, data: Buffer.from(bytes).toString("base64") };
    }
    const body = await bodyDigest(bytes);
    if (stored?.ref !== undefined && stored.at === at && state.turn === stored.turn && state.storedBody === body)
      return undefined;
    let ref: string;
    try {
      ref = await new ThreadBlobs(backend, threadId, "snapshot", KEPT_SNAPSHOTS_PER_THREAD).write(bytes);
    } catch (error) {
      return notStored(error);
    }
    state.turn = turn;
    state.storedBody = body;
    return { turn, ref, ...(at === undefined ? {} : { at }) };
  }

  /** How the last good state is snapshotted (for `Sandbox.runThenSnapshot`). */
  get lastGoodOptions(): SnapshotOptions {
    return { maxSnapshotBytes: this.#options.maxSnapshotBytes };
  }

  /** After a completed eval: `snapshot`, taken of `sandbox` with {@link lastGoodOptions}, is its last good state; none could be taken when undefined. */
  #keepLastGood(state: PersistenceState, sandbox: Sandbox, snapshot: Uint8Array | undefined): void {
    if (snapshot === undefined) {
      forgetLastGood(state);
      return;
    }
    state.lastGood = snapshot;
    state.lastGoodTurn = undefined;
    state.lastGoodOf = sandbox;
  }

  /**
   * After an eval: the rollback decision. A stopped eval (timeout, out of memory, the watchdog, an
   * abort) of a shared sandbox rolls back; any other eval of a sandbox still usable is its last good
   * state. Returns the notices for the model, and whether the session's sandbox must be discarded.
   */
  settle(
    state: PersistenceState,
    report: EvalReport,
    sandbox: Sandbox,
    snapshot: Uint8Array | undefined,
    broken: boolean,
  ): { notices: string[]; discard: boolean } {
    const notices = this.takeNotices(state);
    if (!this.rollsBack) return { notices, discard: broken };
    if (!report.ok && isStop(report.error.code)) {
      notices.push(this.#rollBack(state, report.error.code));
      return { notices, discard: true };
    }
    if (!broken) this.#keepLastGood(state, sandbox, snapshot);
    return { notices, discard: broken };
  }

  /** The session's state is discarded on the model's request (`reset`): nothing to restore, nothing to roll back to. */
  reset(state: PersistenceState): void {
    state.pending = undefined;
    forgetLastGood(state);
    dropRestored(state);
  }

  /** After a run: true when the session holds a state to store: its live sandbox, or a rolled-back state (restored here, off the main thread). */
  async hasStateToStore(state: PersistenceState, open: boolean, threadId: string): Promise<boolean> {
    if (!open && state.pending?.what === "rollback") await this.restore(state, threadId);
    return open || state.restored !== undefined;
  }

  /** The model's notices, taken (each is told once). */
  takeNotices(state: PersistenceState): string[] {
    return state.notices.splice(0);
  }

  /** After a stopped eval: the next sandbox starts from the last good state, and the model is told. */
  #rollBack(state: PersistenceState, code: SandboxErrorCode): string {
    if (state.lastGood === undefined) return PERSISTENCE_TEXT.rolledBackFresh(code);
    dropRestored(state);
    state.pending = {
      bytes: state.lastGood,
      what: "rollback",
      ...(state.lastGoodTurn === undefined ? {} : { turn: state.lastGoodTurn }),
    };
    return PERSISTENCE_TEXT.rolledBack(code);
  }
}

/**
 * The persistence of one session: its {@link PersistenceState}, private, and what the eval tool,
 * the middleware's hooks and the replay of a paused eval may ask of it (see {@link Persistence}
 * for what each step does).
 */
export class SessionPersistence {
  readonly #policy: Persistence;
  readonly #state: PersistenceState;

  constructor(policy: Persistence, state: PersistenceState) {
    this.#policy = policy;
    this.#state = state;
  }

  /** Before a run: arranges a restore when the live session does not hold the stored turn. Returns true when the live sandbox must be dropped. */
  prepare(stored: StoredSnapshot | undefined, live: boolean): boolean {
    return this.#policy.prepare(this.#state, stored, live);
  }

  /** On an eval whose session has no sandbox and was never prepared in this process: arranges a restore from the graph state the eval sees. */
  prepareOnEval(graphState: unknown, evicted: "idle" | "capacity" | undefined): void {
    this.#policy.prepareOnEval(this.#state, graphState, evicted);
  }

  /** Reads a pending snapshot kept in the store or the checkpointer. */
  load(storage: RunStorage, threadId: string): Promise<void> {
    return this.#policy.load(this.#state, storage, threadId);
  }

  /** Restores the pending snapshot on an executor thread, for the next `open`. */
  restore(threadId: string): Promise<void> {
    return this.#policy.restore(this.#state, threadId);
  }

  /** Restores the start state of a paused eval, in place of whatever was pending; throws when it cannot. */
  restoreStart(bytes: Uint8Array): Promise<void> {
    return this.#policy.restoreStart(this.#state, bytes);
  }

  /** The session's sandbox: the restored one, or a fresh one. */
  open(): Sandbox {
    return this.#policy.open(this.#state);
  }

  /** After an eval: the notices for the model, and whether the sandbox must be discarded (rolled back, or broken). */
  settle(
    report: EvalReport,
    sandbox: Sandbox,
    snapshot: Uint8Array | undefined,
    broken: boolean,
  ): { notices: string[]; discard: boolean } {
    return this.#policy.settle(this.#state, report, sandbox, snapshot, broken);
  }

  /** The model asked for a fresh interpreter: nothing to restore, nothing to roll back to. */
  reset(): void {
    this.#policy.reset(this.#state);
  }

  /** After a run: true when there is a state to store (a rolled-back one is restored first). */
  hasStateToStore(open: boolean, threadId: string): Promise<boolean> {
    return this.#policy.hasStateToStore(this.#state, open, threadId);
  }

  /** After a run: the graph-state update storing the sandbox's snapshot, or `undefined` when nothing changed. */
  store(
    sandbox: Sandbox | undefined,
    stored: StoredSnapshot | undefined,
    threadId: string,
    storage?: RunStorage,
  ): Promise<StoredSnapshot | undefined> {
    return this.#policy.store(this.#state, sandbox, stored, threadId, storage);
  }

  /** The notices for the model's next eval, taken. */
  takeNotices(): string[] {
    return this.#policy.takeNotices(this.#state);
  }
}

function forgetLastGood(state: PersistenceState): void {
  state.lastGood = undefined;
  state.lastGoodTurn = undefined;
  state.lastGoodOf = undefined;
}

/** Disposes a restored sandbox no eval took, when another state is to be restored instead. */
function dropRestored(state: PersistenceState): void {
  state.restored?.dispose();
  state.restored = undefined;
}

/** Digest of a snapshot's body, without the header (turn) and signature that change every run; hashed in slices (a state can be tens of MB). */
function bodyDigest(bytes: Uint8Array): Promise<string> {
  return sha256HexInSlices(snapshotBody(bytes));
}

/** True when two snapshots hold the same interpreter state, whatever turn they were signed for. */
function sameBody(a: Uint8Array, b: Uint8Array): boolean {
  try {
    return Buffer.compare(snapshotBody(a), snapshotBody(b)) === 0;
  } catch {
    return false; // a stored value that is not a snapshot differs from any snapshot
  }
}
