/**
 * The replay record of a paused eval: its start snapshot, the clock and `Math.random` seed it ran
 * with, and the journal of every host call it made before it paused for review, in call order.
 * Enough for any process to run the eval again exactly to the paused call without running those
 * calls a second time (see approval.ts).
 *
 * ```
 * offset size
 *      0    8  magic "QJSNJRNL"
 *      8    2  format version (u16 LE), 1
 *     10    2  flags (u16 LE): bit 0 = signed
 *     12    n  payload: v8.serialize of the record (structured clone: Dates, Maps, typed arrays...)
 *   12+n   32  HMAC-SHA256 (signed) or SHA-256 (unsigned) of the domain, thread id, eval call id
 *              and everything before it
 * ```
 * The digest is checked before a byte of the payload is parsed; a signed record is bound to its
 * thread and eval tool call, so it cannot be replayed into another.
 *
 * Records are stored as pending writes of the checkpoint the eval's graph task runs on, under a
 * private task id: a task that raises `interrupt()` keeps no other writes (LangGraph discards them),
 * so graph state cannot carry them, while pending writes live wherever the checkpointer keeps its
 * data (SQLite, Postgres, memory) and come back when the task runs again on resume.
 */
import { createHash, createHmac, timingSafeEqual } from "node:crypto";
import { deserialize, serialize } from "node:v8";
import type { RunnableConfig } from "@langchain/core/runnables";
import { traceOperation } from "../index.js";
import type { StateUpdate } from "./ptc.js";

const MAGIC = Buffer.from("QJSNJRNL", "latin1");
/** Version of the replay record layout this build writes and reads. */
export const JOURNAL_FORMAT_VERSION = 1;
const HEADER_BYTES = 12;
const DIGEST_BYTES = 32;
const FLAG_SIGNED = 1;
const DOMAIN = "quickjs-native replay journal\0";

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

/** What a host call gave guest code. */
export type HostCallOutcome =
  | { ok: true; value: unknown; updates: StateUpdate[] }
  | { ok: false; error: { name: string; message: string } };

/** One completed host call of the journal. */
export interface JournalEntry extends HostCallRequest {
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
  /** Completed host calls, in the order guest code made them. */
  entries: JournalEntry[];
  /** The call that paused, at position `entries.length`. */
  pausedAt: HostCallRequest;
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

function digest(binding: RecordBinding, signed: boolean, bytes: Uint8Array): Buffer {
  const h = signed && binding.key !== undefined ? createHmac("sha256", binding.key) : createHash("sha256");
  h.update(DOMAIN).update(binding.threadId).update("\0").update(binding.evalCallId).update("\0").update(bytes);
  return h.digest();
}

/** Encodes `record` for storage, signed when the binding has a key; throws when it is over `maxBytes` or not cloneable. */
export function encodeRecord(record: ReplayRecord, binding: RecordBinding, maxBytes: number): string {
  return traceOperation("quickjs_native.journal.write", () => encodeNow(record, binding, maxBytes), (text) => text.length);
}

function encodeNow(record: ReplayRecord, binding: RecordBinding, maxBytes: number): string {
  const payload = serialize(record);
  const total = HEADER_BYTES + payload.length + DIGEST_BYTES;
  if (total > maxBytes) throw new ReplayRecordError(`the paused eval's journal and start state take ${total} bytes, over maxSnapshotBytes (${maxBytes})`);
  const header = Buffer.alloc(HEADER_BYTES);
  MAGIC.copy(header, 0);
  header.writeUInt16LE(JOURNAL_FORMAT_VERSION, 8);
  header.writeUInt16LE(binding.key === undefined ? 0 : FLAG_SIGNED, 10);
  const body = Buffer.concat([header, payload]);
  return Buffer.concat([body, digest(binding, binding.key !== undefined, body)]).toString("base64");
}

/** Decodes a stored record, checking size, header and digest (signature with a key) before parsing. */
export function decodeRecord(text: unknown, binding: RecordBinding, maxBytes: number): ReplayRecord {
  if (typeof text !== "string") throw new ReplayRecordError("the stored journal is not a string");
  if (text.length > Math.ceil((maxBytes * 4) / 3) + 4) throw new ReplayRecordError(`the stored journal is over maxSnapshotBytes (${maxBytes})`);
  const bytes = Buffer.from(text, "base64");
  if (bytes.length < HEADER_BYTES + DIGEST_BYTES || !bytes.subarray(0, 8).equals(MAGIC)) throw new ReplayRecordError("the stored journal is not a replay record");
  const version = bytes.readUInt16LE(8);
  if (version !== JOURNAL_FORMAT_VERSION) throw new ReplayRecordError(`the stored journal has format version ${version}; this build reads ${JOURNAL_FORMAT_VERSION}`);
  const signed = (bytes.readUInt16LE(10) & FLAG_SIGNED) !== 0;
  if (binding.key !== undefined && !signed) throw new ReplayRecordError("the stored journal is not signed, but a signing key is set");
  if (signed && binding.key === undefined) throw new ReplayRecordError("the stored journal is signed, but no signing key is set");
  const body = bytes.subarray(0, bytes.length - DIGEST_BYTES);
  const expected = digest(binding, signed, body);
  if (!timingSafeEqual(expected, bytes.subarray(bytes.length - DIGEST_BYTES))) {
    throw new ReplayRecordError(signed ? "the stored journal's signature does not match (altered, or from another thread or eval call)" : "the stored journal is corrupt");
  }
  const record = deserialize(body.subarray(HEADER_BYTES)) as ReplayRecord;
  if (typeof record !== "object" || record === null || !Array.isArray(record.entries) || !(record.startSnapshot instanceof Uint8Array)) {
    throw new ReplayRecordError("the stored journal has an unexpected shape");
  }
  return record;
}

/** SHA-256 of an eval's code, hex. */
export function codeDigestOf(code: string): string {
  return createHash("sha256").update(code).digest("hex");
}

// --- storage in the checkpointer ---------------------------------------------------------------

/** The part of LangGraph's checkpointer interface records need. */
interface PendingWriteSaver {
  putWrites(config: RunnableConfig, writes: [string, unknown][], taskId: string): Promise<void>;
  getTuple(config: RunnableConfig): Promise<{ pendingWrites?: [string, string, unknown][] } | undefined>;
}

// LangGraph's own run-config keys (CONFIG_KEY_CHECKPOINTER, CONFIG_KEY_CHECKPOINT_MAP): the
// checkpointer `interrupt()` itself uses, and the checkpoint the running task belongs to.
const CHECKPOINTER_KEY = "__pregel_checkpointer";
const CHECKPOINT_MAP_KEY = "checkpoint_map";
/** Channel of the pending write holding a record; no graph has it, so LangGraph ignores the write. */
const RECORD_CHANNEL = "__code_interpreter_replay__";
const NS_SEPARATOR = "|";

function isSaver(x: unknown): x is PendingWriteSaver {
  return typeof x === "object" && x !== null && typeof (x as PendingWriteSaver).putWrites === "function" && typeof (x as PendingWriteSaver).getTuple === "function";
}

/**
 * Where the records of one graph task go: the checkpoint it runs on, in its checkpointer. A task's
 * namespace is its graph's namespace plus `node:taskId`; the graph's checkpoint id is in the map.
 */
function locate(config: RunnableConfig): { saver: PendingWriteSaver; checkpoint: RunnableConfig } | undefined {
  const conf = (config.configurable ?? {}) as Record<string, unknown>;
  const saver = conf[CHECKPOINTER_KEY];
  const threadId = conf["thread_id"];
  const taskNs = conf["checkpoint_ns"];
  const map = conf[CHECKPOINT_MAP_KEY];
  if (!isSaver(saver) || typeof threadId !== "string" || typeof taskNs !== "string" || typeof map !== "object" || map === null) return undefined;
  const cut = taskNs.lastIndexOf(NS_SEPARATOR);
  const graphNs = cut < 0 ? "" : taskNs.slice(0, cut);
  const checkpointId = (map as Record<string, unknown>)[graphNs];
  if (typeof checkpointId !== "string") return undefined;
  return { saver, checkpoint: { configurable: { thread_id: threadId, checkpoint_ns: graphNs, checkpoint_id: checkpointId } } };
}

/** The private task id of the record written at a pause: one per pause, since stored writes are never replaced. */
function recordTaskId(evalCallId: string, pause: number): string {
  return `code-interpreter-replay:${evalCallId}:${pause}`;
}

/** Stores and loads replay records through the checkpointer of the running graph. */
export const checkpointerRecords = {
  /** True when the run has a checkpointer records can be stored in. */
  available(config: RunnableConfig): boolean {
    return locate(config) !== undefined;
  },

  /** Stores the record written at pause number `pause` (0 for the eval's first pause). */
  async save(config: RunnableConfig, evalCallId: string, pause: number, data: string): Promise<void> {
    const where = locate(config);
    if (where === undefined) throw new ReplayRecordError("this run has no checkpointer to keep the paused eval in");
    await where.saver.putWrites(where.checkpoint, [[RECORD_CHANNEL, data]], recordTaskId(evalCallId, pause));
  },

  /** The record stored at pause number `pause`, or `undefined` when there is none. */
  async load(config: RunnableConfig, evalCallId: string, pause: number): Promise<unknown> {
    const where = locate(config);
    if (where === undefined) return undefined;
    const tuple = await where.saver.getTuple(where.checkpoint);
    const taskId = recordTaskId(evalCallId, pause);
    return tuple?.pendingWrites?.find(([task, channel]) => task === taskId && channel === RECORD_CHANNEL)?.[2];
  },
};
