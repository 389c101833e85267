/**
 * Large per-thread byte strings (interpreter snapshots; later, eval journals) kept in LangGraph's
 * `BaseStore` as content-addressed chunks, so that graph state, which checkpointers write again at
 * every super-step, holds only a short reference.
 *
 * Layout, per thread and slot (namespace `["quickjs-native", "v1", <thread digest>, <slot>]`):
 * ```
 * chunk:<digest>     { v: 1, z: base64(raw DEFLATE of the chunk) }   written once, shared by blobs
 * blob:<digest>      { v: 1, bytes: total length, chunks: [digest, ...] }   the manifest
 * kept               { v: 1, blobs: [blob digest, ...] }   the last `keep` blobs written, oldest first
 * ```
 * A digest is the first 128 bits of SHA-256, hex. Chunk boundaries are content-defined (a gear
 * rolling hash), so a change in the middle of a blob rewrites the one or two chunks around it,
 * not every chunk after it. Bytes are chunked as they are given: a blob's own format (a signed
 * snapshot) is opaque here, and its signature is what vouches for the reassembled bytes; the
 * digests only catch a missing, altered or misplaced chunk early, with a clear reason.
 *
 * Collection: writing a blob that is not yet kept pushes it onto `kept`; past `keep` entries the
 * oldest blob's manifest is deleted, with every chunk no kept blob still uses. So a thread holds
 * at most `keep` blobs per slot, their chunks shared. A reference older than that (time travel far
 * back) finds no manifest and is refused with a reason.
 */
import { createHash } from "node:crypto";
import { promisify } from "node:util";
import {
  constants as zlibConstants,
  deflateRaw,
  deflateRawSync,
  inflateRaw,
  inflateRawSync,
  type ZlibOptions,
} from "node:zlib";
import type { BaseStore, GetOperation, PutOperation } from "@langchain/langgraph";
import { SandboxError } from "../index.js";
import { type CheckpointerBlobs, CheckpointerSpace, isCheckpointerBlobs } from "./checkpointer-blobs.js";
import { Slicer } from "./slices.js";

const deflateRawAsync = promisify(deflateRaw);
const inflateRawAsync = promisify(inflateRaw);

/**
 * Blobs up to this size are (de)compressed on the calling thread: a few ms per MiB, less than the
 * thread-pool round trips of dozens of chunks. Larger ones go to the thread pool, off the main thread.
 */
const SYNC_ZLIB_BYTES = 1024 * 1024;

function zlibCall(
  sync: (b: Uint8Array, o: ZlibOptions) => Buffer,
  async: (b: Uint8Array, o: ZlibOptions) => Promise<Buffer>,
  onCaller: boolean,
) {
  return (bytes: Uint8Array, options: ZlibOptions): Promise<Buffer> => {
    if (!onCaller) return async(bytes, options);
    try {
      return Promise.resolve(sync(bytes, options));
    } catch (error) {
      return Promise.reject(error);
    }
  };
}

/** Version of the layout above; a reader refuses items of another version with a reason. */
export const THREAD_BLOBS_FORMAT_VERSION = 1;
const NAMESPACE_ROOT = ["quickjs-native", `v${THREAD_BLOBS_FORMAT_VERSION}`] as const;
const KEPT_KEY = "kept";

/** Chunk sizes: boundaries fall where the rolling hash's low bits are zero, between these bounds. */
const MIN_CHUNK_BYTES = 2 * 1024;
const MAX_CHUNK_BYTES = 64 * 1024;
/**
 * 13 bits: one boundary per 8 KiB on average past the minimum. The high bits of the gear hash
 * depend on the last 32 bytes (the low ones on fewer), so they are the ones tested.
 */
const BOUNDARY_MASK = 0xfff80000 | 0;
/** A deflated chunk is at most a little over its raw size; base64 of that, with room to spare. */
const MAX_CHUNK_BASE64_CHARS = Math.ceil((MAX_CHUNK_BYTES + 1024) / 3) * 4;
/** Chunks asked of the store in a read's first batch; each next batch asks for twice as many. */
const FIRST_READ_BATCH = 32;
const DIGEST_HEX_CHARS = 32;
const DIGEST_PATTERN = /^[0-9a-f]{32}$/;

/** 256 pseudo-random 32-bit words for the gear hash; fixed, since boundaries must not move between versions. */
const GEAR: Uint32Array = (() => {
  const table = new Uint32Array(256);
  let x = 0x9e3779b9;
  for (let i = 0; i < 256; i++) {
    // xorshift32: deterministic and well spread.
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    table[i] = x >>> 0;
  }
  return table;
})();

/** Offsets where content-defined chunks end (the last one is `bytes.length`). */
export function chunkBoundaries(bytes: Uint8Array): number[] {
  const ends: number[] = [];
  for (let start = 0; start < bytes.length; start = ends.at(-1)!) ends.push(chunkEnd(bytes, start));
  return ends;
}

/** Where the content-defined chunk starting at `start` ends. */
function chunkEnd(bytes: Uint8Array, start: number): number {
  const limit = Math.min(bytes.length, start + MAX_CHUNK_BYTES);
  let hash = 0;
  for (let i = start + MIN_CHUNK_BYTES; i < limit; i++) {
    hash = ((hash << 1) + GEAR[bytes[i]!]!) | 0;
    if ((hash & BOUNDARY_MASK) === 0) return i + 1;
  }
  return limit;
}

/**
 * The chunks of `bytes` and their digests, cut and hashed a slice per turn of the event loop: a
 * 50 MB journal took over 100 ms of the main thread in one go.
 */
async function chunksOf(bytes: Uint8Array): Promise<{ pieces: Uint8Array[]; digests: string[] }> {
  const pieces: Uint8Array[] = [];
  const digests: string[] = [];
  const slicer = new Slicer();
  for (let start = 0; start < bytes.length; ) {
    const piece = bytes.subarray(start, chunkEnd(bytes, start));
    pieces.push(piece);
    digests.push(digestOf(piece));
    start += piece.length;
    await slicer.spent(piece.length);
  }
  return { pieces, digests };
}

/**
 * Chunks deflated at once when a blob's chunks go to the libuv pool: each deflate costs the main
 * thread a zlib object, and starting one per chunk of a 50 MB blob held it for tens of ms.
 */
const DEFLATES_IN_FLIGHT = 4;

function digestOf(bytes: Uint8Array): string {
  return createHash("sha256").update(bytes).digest("hex").slice(0, DIGEST_HEX_CHARS);
}

function refused(message: string): SandboxError {
  return new SandboxError("INVALID_SNAPSHOT", message);
}

interface Manifest {
  v: number;
  bytes: number;
  chunks: string[];
}

function overflow(): SandboxError {
  return refused("the stored state's chunks hold more than its declared length");
}

function manifestOf(value: unknown, maxBytes: number): Manifest {
  const m = value as Partial<Manifest> | null | undefined;
  if (typeof m !== "object" || m === null) throw refused("the stored state's manifest is not an object");
  if (m.v !== THREAD_BLOBS_FORMAT_VERSION)
    throw refused(
      `the stored state's layout version ${String(m.v)} is not supported (this build reads version ${THREAD_BLOBS_FORMAT_VERSION})`,
    );
  if (typeof m.bytes !== "number" || !Number.isSafeInteger(m.bytes) || m.bytes < 0)
    throw refused("the stored state's manifest has no valid length");
  if (m.bytes > maxBytes) throw refused(`the stored state is ${m.bytes} bytes, over maxSnapshotBytes (${maxBytes})`);
  // Every chunk but the last holds MIN_CHUNK_BYTES to MAX_CHUNK_BYTES, the last at least one byte.
  const count = Array.isArray(m.chunks) ? m.chunks.length : -1;
  const fits =
    m.bytes === 0
      ? count === 0
      : count >= Math.ceil(m.bytes / MAX_CHUNK_BYTES) && (count - 1) * MIN_CHUNK_BYTES + 1 <= m.bytes;
  if (!Array.isArray(m.chunks) || !fits || !m.chunks.every((c) => typeof c === "string" && DIGEST_PATTERN.test(c))) {
    throw refused("the stored state's manifest lists malformed chunks");
  }
  return m as Manifest;
}

/**
 * The store that runs a batch itself. LangGraph hands nodes an `AsyncBatchedStore`, which queues
 * each call until its next timer tick (a millisecond or more each, longer on a busy event loop);
 * a read or write here is a few batches of many operations, sent straight to the store it wraps.
 */
function batchingStoreOf(store: BaseStore): BaseStore {
  const wrapper = store as BaseStore & { lg_name?: unknown; store?: { batch?: unknown } };
  return wrapper.lg_name === "AsyncBatchedStore" && typeof wrapper.store?.batch === "function"
    ? (wrapper.store as BaseStore)
    : store;
}

function keptOf(value: unknown): string[] {
  const blobs = (value as { blobs?: unknown } | null | undefined)?.blobs;
  return Array.isArray(blobs) ? blobs.filter((b): b is string => typeof b === "string" && DIGEST_PATTERN.test(b)) : [];
}

/** A stored value (`undefined`: none), or a value to store (`null`: delete). */
type Stored = Record<string, unknown> | undefined;

/**
 * Where one thread's blobs of one slot live: keys to JSON-shaped values, read and written in
 * batches. Either a `BaseStore` namespace or private checkpoints of the run's checkpointer
 * (checkpointer-blobs.ts); everything read back is hostile, and checked here whichever it is.
 */
export interface BlobSpace {
  get(keys: readonly string[]): Promise<Stored[]>;
  /** Stores each value under its key; `null` deletes. */
  put(entries: readonly (readonly [string, Record<string, unknown> | null])[]): Promise<void>;
}

/** A `BaseStore` namespace per thread and slot. */
class StoreSpace implements BlobSpace {
  readonly #store: BaseStore;
  readonly #namespace: string[];

  constructor(store: BaseStore, threadId: string, slot: string) {
    this.#store = batchingStoreOf(store);
    // Thread ids are free text; store namespaces may not hold periods, and need not show them.
    this.#namespace = [
      ...NAMESPACE_ROOT,
      createHash("sha256").update(threadId, "utf8").digest("hex").slice(0, DIGEST_HEX_CHARS),
      slot,
    ];
  }

  async get(keys: readonly string[]): Promise<Stored[]> {
    const items = await this.#store.batch(keys.map((key): GetOperation => ({ namespace: this.#namespace, key })));
    return items.map((item) => item?.value ?? undefined);
  }

  async put(entries: readonly (readonly [string, Record<string, unknown> | null])[]): Promise<void> {
    if (entries.length > 0)
      await this.#store.batch(
        entries.map(([key, value]): PutOperation => ({ namespace: this.#namespace, key, value, index: false })),
      );
  }
}

/** Where blobs can be kept: the agent's store, or (without one) the run's checkpointer. */
export type BlobBackend = BaseStore | CheckpointerBlobs;

/**
 * One thread's blobs of one kind (`slot`, e.g. "snapshot" or "journal") in a `BaseStore`. Slots
 * are collected independently: a journal never loses a chunk to a snapshot's collection.
 */
export class ThreadBlobs {
  readonly #space: BlobSpace;
  readonly #keep: number;

  /**
   * `keep`: how many of the latest blobs (and their chunks) the slot keeps. `threadId` names the
   * thread's namespace in a store; a checkpointer keeps them under its own thread id.
   */
  constructor(backend: BlobBackend, threadId: string, slot: string, keep: number) {
    this.#space = isCheckpointerBlobs(backend)
      ? new CheckpointerSpace(backend, slot)
      : new StoreSpace(backend, threadId, slot);
    this.#keep = keep;
  }

  /** Stores `bytes`; returns the reference to keep in graph state. Writes only chunks the slot does not hold. */
  async write(bytes: Uint8Array): Promise<string> {
    const { pieces, digests: chunks } = await chunksOf(bytes);
    const manifest: Manifest = { v: THREAD_BLOBS_FORMAT_VERSION, bytes: bytes.length, chunks };
    const ref = digestOf(Buffer.from(JSON.stringify(manifest), "utf8"));

    const [keptValue] = await this.#space.get([KEPT_KEY]);
    const kept = keptOf(keptValue);
    const keptChunks = await this.#chunksOf(kept);
    const held = new Set(keptChunks.flat());
    const written = new Set<string>();
    const deflate = zlibCall(deflateRawSync, deflateRawAsync, bytes.length <= SYNC_ZLIB_BYTES);
    const fresh: number[] = [];
    for (let i = 0; i < pieces.length; i++) {
      const digest = chunks[i]!;
      if (held.has(digest) || written.has(digest)) continue;
      written.add(digest);
      fresh.push(i);
    }
    // A few lanes take the next chunk in turn; deflating on the caller, they give the event loop a turn every slice.
    const puts: [string, Record<string, unknown>][] = new Array(fresh.length);
    const slicer = new Slicer();
    let taken = 0;
    const lane = async (): Promise<void> => {
      while (taken < fresh.length) {
        const k = taken++;
        const piece = pieces[fresh[k]!]!;
        const z = await deflate(piece, { level: zlibConstants.Z_BEST_SPEED });
        puts[k] = [`chunk:${chunks[fresh[k]!]!}`, { v: THREAD_BLOBS_FORMAT_VERSION, z: z.toString("base64") }];
        await slicer.spent(piece.length);
      }
    };
    await Promise.all(Array.from({ length: DEFLATES_IN_FLIGHT }, lane));
    await this.#space.put(puts);

    // The manifest goes in after its chunks: a reader never finds a manifest whose chunks are not there yet.
    const next = [...kept.filter((b) => b !== ref), ref];
    const dropped = next.splice(0, Math.max(0, next.length - this.#keep));
    await this.#space.put([
      ...(kept.includes(ref) ? [] : [[`blob:${ref}`, { ...manifest }] as const]),
      [KEPT_KEY, { v: THREAD_BLOBS_FORMAT_VERSION, blobs: next }],
    ]);
    if (dropped.length > 0) {
      const stillUsed = new Set([...chunks, ...keptChunks.filter((_, i) => next.includes(kept[i]!)).flat()]);
      const garbage = new Set(
        keptChunks
          .filter((_, i) => dropped.includes(kept[i]!))
          .flat()
          .filter((c) => !stillUsed.has(c)),
      );
      await this.#space.put([
        ...dropped.map((b) => [`blob:${b}`, null] as const),
        ...[...garbage].map((c) => [`chunk:${c}`, null] as const),
      ]);
    }
    return ref;
  }

  /**
   * The bytes of blob `ref`, every chunk checked against its digest. Throws `INVALID_SNAPSHOT` with
   * the reason when the manifest or a chunk is missing, altered or of an unknown version.
   *
   * Stored items are hostile: the manifest is checked against its reference and its chunk count
   * against its length before any chunk is read, chunks are fetched in order in batches of growing
   * size and inflated one by one into a buffer of the declared length, and every chunk must fit
   * what the declared length leaves for it (each chunk but the last holds at least
   * `MIN_CHUNK_BYTES`). So a manifest listing many large chunks under a small length is refused at
   * its first chunk that overflows, and no more than the declared length is ever inflated.
   */
  async read(ref: string, maxBytes: number): Promise<Uint8Array> {
    if (!DIGEST_PATTERN.test(ref)) throw refused("the stored state's reference is malformed");
    const [value] = await this.#space.get([`blob:${ref}`]);
    if (value === undefined)
      throw refused("the stored state is no longer in the store (collected, or written to another store)");
    const manifest = manifestOf(value, maxBytes);
    if (
      digestOf(
        Buffer.from(JSON.stringify({ v: manifest.v, bytes: manifest.bytes, chunks: manifest.chunks }), "utf8"),
      ) !== ref
    ) {
      throw refused("the stored state's manifest does not match its reference (altered)");
    }
    const { bytes: declared, chunks } = manifest;
    const out = Buffer.allocUnsafe(declared);
    const inflate = zlibCall(inflateRawSync, inflateRawAsync, declared <= SYNC_ZLIB_BYTES);
    /** Where each chunk already placed sits in `out`: a repeated chunk is copied from there. */
    const placed = new Map<string, { at: number; length: number }>();
    let filled = 0;
    let batch = FIRST_READ_BATCH;
    for (let next = 0; next < chunks.length; batch *= 2) {
      // The next chunks in order whose digest was not placed yet, fetched in one store batch.
      const wanted = new Set<string>();
      for (let i = next; i < chunks.length && wanted.size < batch; i++) {
        if (!placed.has(chunks[i]!)) wanted.add(chunks[i]!);
      }
      const values = wanted.size === 0 ? [] : await this.#space.get([...wanted].map((digest) => `chunk:${digest}`));
      const fetched = new Map([...wanted].map((digest, i) => [digest, values[i]]));
      for (; next < chunks.length; next++) {
        const digest = chunks[next]!;
        const after = chunks.length - next - 1;
        // What the declared length leaves for this chunk: every later chunk needs its minimum.
        const room = declared - filled - (after === 0 ? 0 : (after - 1) * MIN_CHUNK_BYTES + 1);
        const known = placed.get(digest);
        let length: number;
        if (known !== undefined) {
          length = known.length;
          if (length > room) throw overflow();
          out.copy(out, filled, known.at, known.at + length);
        } else if (fetched.has(digest)) {
          const piece = await this.#chunk(digest, fetched.get(digest), Math.min(MAX_CHUNK_BYTES, room), inflate);
          length = piece.length;
          piece.copy(out, filled);
          placed.set(digest, { at: filled, length });
        } else {
          break; // fetched by the next batch
        }
        if (after > 0 ? length < MIN_CHUNK_BYTES : filled + length !== declared)
          throw refused("the stored state's chunks do not add up to its length");
        filled += length;
      }
    }
    if (filled !== declared) throw refused("the stored state's chunks do not add up to its length");
    return new Uint8Array(out.buffer, out.byteOffset, out.length);
  }

  /** Chunk `digest` from its stored `value`, inflated to at most `room` bytes and checked against its digest. */
  async #chunk(
    digest: string,
    value: unknown,
    room: number,
    inflate: (b: Uint8Array, o: ZlibOptions) => Promise<Buffer>,
  ): Promise<Buffer> {
    if (value === undefined || value === null) throw refused(`a chunk of the stored state is missing (${digest})`);
    const { v, z } = value as { v?: unknown; z?: unknown };
    if (v !== THREAD_BLOBS_FORMAT_VERSION || typeof z !== "string" || z.length > MAX_CHUNK_BASE64_CHARS)
      throw refused(`a chunk of the stored state is malformed (${digest})`);
    if (room <= 0) throw overflow();
    let piece: Buffer;
    try {
      piece = await inflate(Buffer.from(z, "base64"), { maxOutputLength: room });
    } catch (error) {
      if ((error as { code?: unknown }).code === "ERR_BUFFER_TOO_LARGE") throw overflow();
      throw refused(`a chunk of the stored state does not inflate (${digest})`);
    }
    if (digestOf(piece) !== digest)
      throw refused(`a chunk of the stored state does not match its digest (altered or foreign: ${digest})`);
    return piece;
  }

  /** The chunk lists of the given kept blobs (an empty list for one whose manifest is gone). */
  async #chunksOf(blobs: readonly string[]): Promise<string[][]> {
    if (blobs.length === 0) return [];
    const values = await this.#space.get(blobs.map((b) => `blob:${b}`));
    return values.map((value) => {
      const chunks = (value as { chunks?: unknown } | undefined)?.chunks;
      return Array.isArray(chunks) ? chunks.filter((c): c is string => typeof c === "string") : [];
    });
  }
}
