/**
 * The replay record of a paused eval: its start snapshot, the clock and `Math.random` seed it ran
 * with, and the journal of every host call that completed before it paused for review, whatever
 * its position, in the order the calls settled. Enough for any process to run the eval again
 * exactly to the paused call without running those calls a second time (see approval.ts).
 *
 * ```
 * offset size
 *      0    8  magic "QJSNJRNL"
 *      8    2  format version (u16 LE), 2
 *     10    2  flags (u16 LE): bit 0 = signed
 *     12    …  sections, each a u32 LE length and its bytes:
 *                the head (v8.serialize of everything but the entries and the snapshot, with the
 *                entry count), the start snapshot (raw), then one v8.serialize per journal entry
 *    end-32   32  HMAC-SHA256 (signed) or SHA-256 (unsigned) of the domain, thread id, eval call id,
 *              storage slot (checkpoint and pause number) and everything before it
 * ```
 * The digest is checked before a byte of the payload is parsed; a signed record is bound to its
 * thread, its eval tool call and the slot it is stored in, so it cannot be replayed into another
 * thread or eval, nor moved to another pause. Version 1 records (no slot binding, journal cut at
 * the paused position) are refused.
 *
 * Encoding and decoding yield to the event loop between entries and between slices of the digest
 * and the base64 text, so a large journal never holds the shared main thread for long.
 *
 * Records are stored as pending writes of the checkpoint the eval's graph task runs on, under a
 * private task id: a task that raises `interrupt()` keeps no other writes (LangGraph discards them),
 * so graph state cannot carry them, while pending writes live wherever the checkpointer keeps its
 * data (SQLite, Postgres, memory) and come back when the task runs again on resume.
 */
import { createHash, createHmac, timingSafeEqual, type Hash, type Hmac } from "node:crypto";
import { deserialize, serialize } from "node:v8";
import type { RunnableConfig } from "@langchain/core/runnables";
import type { BaseStore } from "@langchain/langgraph";
import { traceOperation } from "../index.js";
import type { StateUpdate } from "./ptc.js";
import { CHECKPOINTER_KEY } from "./checkpointer-blobs.js";
import { Slicer, updateInSlices, yieldToLoop } from "./slices.js";
import { ThreadBlobs } from "./thread-blobs.js";

const MAGIC = Buffer.from("QJSNJRNL", "latin1");
/** Version of the replay record layout this build writes and reads. */
export const JOURNAL_FORMAT_VERSION = 2;
const HEADER_BYTES = 12;
const LENGTH_BYTES = 4;
const DIGEST_BYTES = 32;
const FLAG_SIGNED = 1;
const DOMAIN = "quickjs-native replay journal v2\0";
/**
 * Bytes hashed or base64-coded between two yields to the event loop, and bytes per stored piece
 * (a multiple of 3, so each piece is base64 of its own, 512 KiB of text: a checkpointer's
 * serializer takes a few ms for that much).
 */
const SLICE_BYTES = 3 * 128 * 1024;
const PIECE_CHARS = (SLICE_BYTES / 3) * 4;

/** What guest code called: a tool under `tools`, or a subagent with `task()`. */
export type HostCallKind = "tool" | "task";

/** One host call as guest code made it. */
export interface HostCallRequest {
  kind: HostCallKind;
  /** The tool's own name (`send_email`), or `task`. */
  name: string;
  /** The call's argument object, as the guest passed it. */
  args: Record<string, unknown>;
}

/** A host call at its position in the eval's call order (0 for the first call). */
export interface PositionedCall extends HostCallRequest {
  position: number;
}

/** What a host call gave guest code. */
export type HostCallOutcome =
  | { ok: true; value: unknown; updates: StateUpdate[] }
  | { ok: false; error: { name: string; message: string } };

/** One completed host call of the journal. */
export interface JournalEntry extends PositionedCall {
  /** True when the call paused for review: replaying it consumes its recorded decision again. */
  reviewed: boolean;
  outcome: HostCallOutcome;
}

/** Everything needed to run a paused eval again up to the call it paused on. */
export interface ReplayRecord {
  /** SHA-256 of the eval's code: a record never drives other code. */
  codeDigest: string;
  /** The guest clock of the eval (ms since the epoch); absent with the real clock. */
  clockMs: number | undefined;
  /** The `Math.random` seed the eval ran with. */
  randomSeed: number;
  /** Console lines written before the pause: already streamed, not streamed again. */
  consoleLines: number;
  /** Every host call that completed before the pause, at any position, in the order they settled. */
  entries: JournalEntry[];
  /** The call that paused. */
  pausedAt: PositionedCall;
  /** The sandbox before the eval ran (an unsigned snapshot; this record's digest covers it). */
  startSnapshot: Uint8Array;
}

/** What a record is bound to. */
export interface RecordBinding {
  /** HMAC key; unsigned records (SHA-256 only) without it. */
  key: Uint8Array | undefined;
  threadId: string;
  evalCallId: string;
}

/** A replay record that cannot be used: missing, altered, foreign, or of another format. */
export class ReplayRecordError extends Error {
  override readonly name = "ReplayRecordError";
}

/** The head section: the record without its entries and snapshot. */
type RecordHead = Omit<ReplayRecord, "entries" | "startSnapshot"> & { entryCount: number };

/** Digest of the binding, the storage slot and `parts`, fed in slices with yields between them. */
async function digest(
  binding: RecordBinding,
  slot: string,
  signed: boolean,
  parts: readonly Uint8Array[],
): Promise<Buffer> {
  const h: Hash | Hmac = signed && binding.key !== undefined ? createHmac("sha256", binding.key) : createHash("sha256");
  h.update(DOMAIN)
    .update(binding.threadId)
    .update("\0")
    .update(binding.evalCallId)
    .update("\0")
    .update(slot)
    .update("\0");
  const slicer = new Slicer();
  for (const part of parts) await updateInSlices(h, part, slicer);
  return h.digest();
}

function lengthPrefixed(bytes: Uint8Array): Buffer[] {
  const length = Buffer.alloc(LENGTH_BYTES);
  length.writeUInt32LE(bytes.length, 0);
  return [length, Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength)];
}

/**
 * Encodes `record` for storage in `slot` (where it is stored: checkpoint and pause number), signed
 * when the binding has a key, as base64 pieces of {@link SLICE_BYTES} each (the checkpointer
 * serializes each stored piece at once, so none is large); rejects when it is over `maxBytes` or
 * not cloneable.
 */
export function encodeRecord(
  record: ReplayRecord,
  binding: RecordBinding,
  slot: string,
  maxBytes: number,
): Promise<string[]> {
  return traceOperation(
    "quickjs_native.journal.write",
    async () => toBase64Pieces(await encodeRecordParts(record, binding, slot, maxBytes)),
    (pieces) => pieces.reduce((chars, piece) => chars + piece.length, 0),
  );
}

/** The bytes of an encoded record, as parts to be concatenated. */
function encodeRecordParts(
  record: ReplayRecord,
  binding: RecordBinding,
  slot: string,
  maxBytes: number,
): Promise<Buffer[]> {
  const { entries, startSnapshot, ...rest } = record;
  const head: RecordHead = { ...rest, entryCount: entries.length };
  return encodeSignedParts(
    head,
    startSnapshot,
    entries,
    binding,
    slot,
    maxBytes,
    "the paused eval's journal and start state",
  );
}

/**
 * The parts of one signed body in the record layout: `head` (v8-serialized), the raw section, then
 * one section per entry, and the digest bound to `binding` and `slot`; rejects when the whole is
 * over `maxBytes` (`what` names it in the error; `already`: bytes written before it, counted in
 * the whole) or an entry is not cloneable.
 * @internal
 */
export async function encodeSignedParts(
  head: object,
  raw: Uint8Array,
  entries: readonly JournalEntry[],
  binding: RecordBinding,
  slot: string,
  maxBytes: number,
  what: string,
  already = 0,
): Promise<Buffer[]> {
  const parts: Buffer[] = [Buffer.alloc(HEADER_BYTES), ...lengthPrefixed(serialize(head)), ...lengthPrefixed(raw)];
  MAGIC.copy(parts[0]!, 0);
  parts[0]!.writeUInt16LE(JOURNAL_FORMAT_VERSION, 8);
  parts[0]!.writeUInt16LE(binding.key === undefined ? 0 : FLAG_SIGNED, 10);
  let total = already + HEADER_BYTES + 2 * LENGTH_BYTES + parts[2]!.length + raw.length + DIGEST_BYTES;
  const tooLarge = (): ReplayRecordError =>
    new ReplayRecordError(`${what} take ${total} bytes, over maxSnapshotBytes (${maxBytes})`);
  if (total > maxBytes) throw tooLarge();
  for (const [i, entry] of entries.entries()) {
    // One entry at a time: the cost between two yields is one call's arguments and outcome (a
    // batch of one call, as each sequential call writes, costs no turn).
    if (i > 0) await yieldToLoop();
    const bytes = bytesOfEntries.get(entry) ?? serialize(entry);
    total += LENGTH_BYTES + bytes.length;
    if (total > maxBytes) throw tooLarge();
    parts.push(...lengthPrefixed(bytes));
  }
  parts.push(await digest(binding, slot, binding.key !== undefined, parts));
  return parts;
}

/** The concatenation of `parts`, copied a slice at a time. */
async function concatInSlices(parts: readonly Buffer[]): Promise<Buffer> {
  const out = Buffer.allocUnsafe(parts.reduce((n, part) => n + part.length, 0));
  let filled = 0;
  for (const part of parts) {
    for (let at = 0; at < part.length; at += SLICE_BYTES) {
      filled += part.copy(out, filled, at, at + SLICE_BYTES);
      await yieldToLoop();
    }
  }
  return out;
}

/**
 * Base64 of the concatenation of `parts`, one piece per slice (each byte copied once, into a slice).
 * @internal
 */
export async function toBase64Pieces(parts: readonly Buffer[]): Promise<string[]> {
  const text: string[] = [];
  // No larger than the parts: a journal batch of one call is a few hundred bytes.
  const slice = Buffer.allocUnsafe(
    Math.min(
      SLICE_BYTES,
      parts.reduce((n, part) => n + part.length, 0),
    ),
  );
  let filled = 0;
  for (const part of parts) {
    for (let at = 0; at < part.length; ) {
      const copied = part.copy(slice, filled, at, at + SLICE_BYTES - filled);
      filled += copied;
      at += copied;
      if (filled === SLICE_BYTES) {
        text.push(slice.toString("base64"));
        filled = 0;
        await yieldToLoop();
      }
    }
  }
  if (filled > 0 || text.length === 0) text.push(slice.toString("base64", 0, filled));
  return text;
}

/**
 * Bytes of base64 `pieces` (every piece but the last a whole slice), a piece at a time;
 * `undefined` when they are not such pieces. Sizes are checked before anything is allocated.
 * @internal
 */
export async function fromBase64Pieces(pieces: unknown, maxBytes: number): Promise<Buffer | undefined> {
  if (!Array.isArray(pieces) || pieces.length === 0) return undefined;
  const overCap = (): ReplayRecordError =>
    new ReplayRecordError(`the stored journal is over maxSnapshotBytes (${maxBytes})`);
  if (pieces.length > Math.ceil(maxBytes / SLICE_BYTES) + 1) throw overCap();
  let chars = 0;
  for (const [i, piece] of pieces.entries()) {
    if (typeof piece !== "string" || piece.length % 4 !== 0 || (i < pieces.length - 1 && piece.length !== PIECE_CHARS))
      return undefined;
    chars += piece.length;
  }
  if ((chars / 4) * 3 > maxBytes + 2) throw overCap();
  const out = Buffer.alloc((chars / 4) * 3);
  let written = 0;
  for (const [i, piece] of (pieces as string[]).entries()) {
    if (!/^[A-Za-z0-9+/]*={0,2}$/.test(piece) || (piece.includes("=") && i < pieces.length - 1)) return undefined;
    written += out.write(piece, written, "base64");
    if (i < pieces.length - 1) await yieldToLoop();
  }
  return out.subarray(0, written);
}

/** Reads the length-prefixed sections after the header; `undefined` when a length runs past the end. */
function sectionsOf(body: Buffer): Buffer[] | undefined {
  const sections: Buffer[] = [];
  let at = HEADER_BYTES;
  while (at < body.length) {
    if (body.length - at < LENGTH_BYTES) return undefined;
    const length = body.readUInt32LE(at);
    at += LENGTH_BYTES;
    if (length > body.length - at) return undefined;
    sections.push(body.subarray(at, at + length));
    at += length;
  }
  return sections;
}

function isPositionedCall(x: unknown): x is PositionedCall {
  const c = x as PositionedCall | null;
  return (
    typeof c === "object" &&
    c !== null &&
    (c.kind === "tool" || c.kind === "task") &&
    typeof c.name === "string" &&
    typeof c.args === "object" &&
    c.args !== null &&
    Number.isSafeInteger(c.position) &&
    c.position >= 0
  );
}

function isEntry(x: unknown): x is JournalEntry {
  const e = x as JournalEntry;
  return (
    isPositionedCall(x) &&
    typeof e.reviewed === "boolean" &&
    typeof e.outcome === "object" &&
    e.outcome !== null &&
    typeof e.outcome.ok === "boolean"
  );
}

/**
 * Decodes a record stored in `slot`, checking size, header, version and digest (signature with a
 * key) before parsing; throws a {@link ReplayRecordError} saying what is wrong.
 */
export async function decodeRecord(
  pieces: unknown,
  binding: RecordBinding,
  slot: string,
  maxBytes: number,
): Promise<ReplayRecord> {
  return decodeRecordBytes(await fromBase64Pieces(pieces, maxBytes), binding, slot);
}

/** {@link decodeRecord} of the record's bytes, already within the size cap (`undefined`: not a record). */
async function decodeRecordBytes(
  bytes: Buffer | undefined,
  binding: RecordBinding,
  slot: string,
): Promise<ReplayRecord> {
  const { head: decoded, raw: snapshot, entries: entryBytes } = await decodeSignedBytes(bytes, binding, slot);
  const head = decoded as RecordHead;
  if (
    typeof head !== "object" ||
    head === null ||
    head.entryCount !== entryBytes.length ||
    !isPositionedCall(head.pausedAt)
  )
    throw shapeError();
  // One entry per position, none at the paused one: a replay answers each position once.
  const entries = await parseEntries(entryBytes, new Set([head.pausedAt.position]));
  const { entryCount: _count, ...rest } = head;
  return { ...rest, entries, startSnapshot: new Uint8Array(snapshot) };
}

const shapeError = (): ReplayRecordError => new ReplayRecordError("the stored journal has an unexpected shape");

/**
 * The sections of one signed body (see {@link encodeSignedParts}): checks header, version, signing
 * and digest before a byte is parsed, then the section lengths; the head is deserialized, unchecked.
 * @internal
 */
export async function decodeSignedBytes(
  bytes: Buffer | undefined,
  binding: RecordBinding,
  slot: string,
): Promise<{ head: unknown; raw: Buffer; entries: Buffer[] }> {
  if (bytes === undefined || bytes.length < HEADER_BYTES + DIGEST_BYTES || !bytes.subarray(0, 8).equals(MAGIC))
    throw new ReplayRecordError("the stored journal is not a replay record");
  const version = bytes.readUInt16LE(8);
  if (version !== JOURNAL_FORMAT_VERSION)
    throw new ReplayRecordError(
      `the stored journal has format version ${version}; this build reads ${JOURNAL_FORMAT_VERSION}`,
    );
  const signed = (bytes.readUInt16LE(10) & FLAG_SIGNED) !== 0;
  if (binding.key !== undefined && !signed)
    throw new ReplayRecordError("the stored journal is not signed, but a signing key is set");
  if (signed && binding.key === undefined)
    throw new ReplayRecordError("the stored journal is signed, but no signing key is set");
  const body = bytes.subarray(0, bytes.length - DIGEST_BYTES);
  const expected = await digest(binding, slot, signed, [body]);
  if (!timingSafeEqual(expected, bytes.subarray(bytes.length - DIGEST_BYTES))) {
    throw new ReplayRecordError(
      signed
        ? "the stored journal's signature does not match (altered, or from another thread, eval call or pause)"
        : "the stored journal is corrupt",
    );
  }
  const sections = sectionsOf(body);
  if (sections === undefined || sections.length < 2) throw shapeError();
  const [headBytes, raw, ...entries] = sections as [Buffer, Buffer, ...Buffer[]];
  return { head: deserialize(headBytes) as unknown, raw, entries };
}

/**
 * The entries of checked sections; a position already in `positions` (which gets each one) is refused.
 * @internal
 */
export async function parseEntries(entryBytes: readonly Buffer[], positions: Set<number>): Promise<JournalEntry[]> {
  const entries: JournalEntry[] = [];
  for (const one of entryBytes) {
    await yieldToLoop();
    const entry: unknown = deserialize(one);
    if (!isEntry(entry) || positions.has(entry.position)) throw shapeError();
    positions.add(entry.position);
    entries.push(withOutcomeOnDemand(entry, one));
  }
  return entries;
}

/** The bytes an entry held serialized is written as (its outcome is read from them). */
const bytesOfEntries = new WeakMap<JournalEntry, Buffer>();

/**
 * `entry`, its outcome decoded again from its checked bytes each time it is read. Outcomes are
 * guest-sized (a 50 MB journal is mostly tool results): kept decoded for the whole replay, they
 * survived every young-generation collection, each copying them on the main thread.
 */
function withOutcomeOnDemand(entry: JournalEntry, bytes: Buffer): JournalEntry {
  const { outcome: _decoded, ...rest } = entry;
  const held = Object.defineProperty(rest, "outcome", {
    enumerable: true,
    get: () => (deserialize(bytes) as JournalEntry).outcome,
  }) as JournalEntry;
  bytesOfEntries.set(held, bytes);
  return held;
}

/**
 * A call that settled in a live eval, as its journal holds it until the eval pauses: serialized
 * now, as the record will store it, its outcome decoded when read (see {@link withOutcomeOnDemand};
 * the caller's own outcome, updates included, stays as it is). An entry that cannot be serialized
 * is held as it is, and the record's write says why it cannot be stored.
 */
export function heldEntry(entry: JournalEntry): JournalEntry {
  let bytes: Buffer;
  try {
    bytes = serialize(entry);
  } catch {
    return entry;
  }
  return withOutcomeOnDemand(entry, bytes);
}

/** SHA-256 of an eval's code, hex. */
export function codeDigestOf(code: string): string {
  return createHash("sha256").update(code).digest("hex");
}

// --- storage in the checkpointer ---------------------------------------------------------------

/** The part of LangGraph's checkpointer interface records need. */
export interface PendingWriteSaver {
  putWrites(config: RunnableConfig, writes: [string, unknown][], taskId: string): Promise<void>;
  getTuple(config: RunnableConfig): Promise<{ pendingWrites?: [string, string, unknown][] } | undefined>;
}

// LangGraph's own run-config key (CONFIG_KEY_CHECKPOINT_MAP): the checkpoint the running task
// belongs to; CHECKPOINTER_KEY names the checkpointer `interrupt()` itself uses.
const CHECKPOINT_MAP_KEY = "checkpoint_map";
/** Channel of the pending write holding a record; no graph has it, so LangGraph ignores the write. */
export const RECORD_CHANNEL = "__code_interpreter_replay__";
const NS_SEPARATOR = "|";

function isSaver(x: unknown): x is PendingWriteSaver {
  return (
    typeof x === "object" &&
    x !== null &&
    typeof (x as PendingWriteSaver).putWrites === "function" &&
    typeof (x as PendingWriteSaver).getTuple === "function"
  );
}

/**
 * Where the records of one graph task go: the checkpoint it runs on, in its checkpointer. A task's
 * namespace is its graph's namespace plus `node:taskId`; the graph's checkpoint id is in the map.
 */
export function locate(
  config: RunnableConfig,
):
  | { saver: PendingWriteSaver; checkpoint: RunnableConfig; threadId: string; graphNs: string; checkpointId: string }
  | undefined {
  const conf = (config.configurable ?? {}) as Record<string, unknown>;
  const saver = conf[CHECKPOINTER_KEY];
  const threadId = conf["thread_id"];
  const taskNs = conf["checkpoint_ns"];
  const map = conf[CHECKPOINT_MAP_KEY];
  if (
    !isSaver(saver) ||
    typeof threadId !== "string" ||
    typeof taskNs !== "string" ||
    typeof map !== "object" ||
    map === null
  )
    return undefined;
  const cut = taskNs.lastIndexOf(NS_SEPARATOR);
  const graphNs = cut < 0 ? "" : taskNs.slice(0, cut);
  const checkpointId = (map as Record<string, unknown>)[graphNs];
  if (typeof checkpointId !== "string") return undefined;
  return {
    saver,
    checkpoint: { configurable: { thread_id: threadId, checkpoint_ns: graphNs, checkpoint_id: checkpointId } },
    threadId,
    graphNs,
    checkpointId,
  };
}

/**
 * The private task id of the record written at a pause: one per pause, since stored writes are
 * never replaced; piece `i` of the record is stored under `<task id>:i`.
 */
function recordTaskId(evalCallId: string, pause: number): string {
  return `code-interpreter-replay:${evalCallId}:${pause}`;
}

/** Everything the storage key of a record says (besides the thread): a record is signed for it. */
export function slotOf(where: { graphNs: string; checkpointId: string }, taskId: string): string {
  return JSON.stringify([where.graphNs, where.checkpointId, taskId]);
}

/** The one stored piece of a record kept in the agent's store: this prefix and the blob's reference. */
const STORE_PIECE_PREFIX = "store:";
/** Journals kept per thread in the store (thread-blobs.ts collects older ones). */
const KEPT_JOURNALS_PER_THREAD = 4;

/** The thread's journal blobs in the run's store (`config.store`, as LangGraph hands it to tools), if it has one. */
function journalBlobsOf(config: RunnableConfig, threadId: string): ThreadBlobs | undefined {
  const store = (config as { store?: BaseStore }).store;
  return typeof store?.batch === "function"
    ? new ThreadBlobs(store, threadId, "journal", KEPT_JOURNALS_PER_THREAD)
    : undefined;
}

function reasonOf(err: unknown): string {
  return err instanceof Error ? err.message : String(err);
}

/**
 * Stores and loads replay records through the checkpointer of the running graph. With a store,
 * the record's bytes go to the store (thread-blobs.ts) and the checkpointer keeps one short piece
 * naming them: a checkpointer deserializes every pending write of a checkpoint at once whenever it
 * is read (LangGraph reads it at each resume), which for a 50 MB journal held the event loop for
 * seconds. Without a store, the record is kept in the checkpointer as base64 pieces.
 */
export const checkpointerRecords = {
  /** True when the run has a checkpointer records can be stored in. */
  available(config: RunnableConfig): boolean {
    return locate(config) !== undefined;
  },

  /** Stores `record` as the one written at pause number `pause` (0 for the eval's first pause), bound to where it is stored. */
  async save(
    config: RunnableConfig,
    evalCallId: string,
    pause: number,
    record: ReplayRecord,
    binding: RecordBinding,
    maxBytes: number,
  ): Promise<void> {
    const where = locate(config);
    if (where === undefined) throw new ReplayRecordError("this run has no checkpointer to keep the paused eval in");
    const taskId = recordTaskId(evalCallId, pause);
    const parts = await encodeRecordParts(record, binding, slotOf(where, taskId), maxBytes);
    const blobs = journalBlobsOf(config, where.threadId);
    const pieces =
      blobs === undefined
        ? await toBase64Pieces(parts)
        : [`${STORE_PIECE_PREFIX}${await blobs.write(await concatInSlices(parts))}`];
    // One write per piece, a turn of the event loop apart: a checkpointer serializes a write at once.
    for (const [i, piece] of pieces.entries()) {
      if (i > 0) await yieldToLoop();
      await where.saver.putWrites(where.checkpoint, [[RECORD_CHANNEL, piece]], `${taskId}:${i}`);
    }
  },

  /**
   * The record stored at pause number `pause`, checked (see {@link decodeRecord}); `undefined`
   * when none was stored. Pieces past a missing one are left out (the digest then refuses it).
   */
  async load(
    config: RunnableConfig,
    evalCallId: string,
    pause: number,
    binding: RecordBinding,
    maxBytes: number,
  ): Promise<ReplayRecord | undefined> {
    const where = locate(config);
    if (where === undefined) return undefined;
    const tuple = await where.saver.getTuple(where.checkpoint);
    const taskId = recordTaskId(evalCallId, pause);
    const byTask = new Map<string, unknown>();
    for (const [task, channel, value] of tuple?.pendingWrites ?? [])
      if (channel === RECORD_CHANNEL && task.startsWith(`${taskId}:`)) byTask.set(task, value);
    const pieces: unknown[] = [];
    while (byTask.has(`${taskId}:${pieces.length}`)) pieces.push(byTask.get(`${taskId}:${pieces.length}`));
    // A version 1 record was one write under the task id itself: read, so it is refused by its version.
    const legacy =
      pieces.length === 0
        ? tuple?.pendingWrites?.find(([task, channel]) => task === taskId && channel === RECORD_CHANNEL)
        : undefined;
    if (legacy !== undefined) pieces.push(legacy[2]);
    if (pieces.length === 0) return undefined;
    const slot = slotOf(where, taskId);
    const [first] = pieces;
    if (pieces.length > 1 || typeof first !== "string" || !first.startsWith(STORE_PIECE_PREFIX))
      return decodeRecord(pieces, binding, slot, maxBytes);
    const blobs = journalBlobsOf(config, where.threadId);
    if (blobs === undefined)
      throw new ReplayRecordError("the paused eval's journal is kept in the agent's store, but this run has no store");
    let bytes: Uint8Array;
    try {
      bytes = await blobs.read(first.slice(STORE_PIECE_PREFIX.length), maxBytes);
    } catch (err) {
      throw new ReplayRecordError(`the paused eval's journal cannot be read from the store (${reasonOf(err)})`);
    }
    return decodeRecordBytes(Buffer.from(bytes.buffer, bytes.byteOffset, bytes.length), binding, slot);
  },
};
