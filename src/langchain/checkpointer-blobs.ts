/**
 * A thread's blobs (thread-blobs.ts) kept in the run's own checkpointer, for agents without a
 * store. LangGraph's checkpointers write every channel value into every checkpoint (SQLite) or
 * rewrite a changed one whole (Postgres), so a snapshot kept in graph state costs its full size
 * several times per turn. Here each key of the blob space (a chunk, a manifest, the list of kept
 * blobs) is one private checkpoint of the thread, its value in the checkpoint's metadata:
 *
 * ```
 * thread_id      the agent's thread
 * checkpoint_ns  "__quickjs_native_blobs__:<slot>"   no graph uses it; LangGraph lists and resumes
 *                                                    only the namespaces of its own graphs
 * checkpoint_id  the key ("chunk:<digest>", "blob:<digest>", "kept")
 * metadata       { source: "update", step: -1, parents: {}, quickjs_native_blob: <value> }
 * ```
 * Every checkpointer replaces a checkpoint put again under the same id (metadata included), so
 * `kept` can be rewritten and a collected key becomes an empty checkpoint; `deleteThread` takes
 * them with the thread. A chunk is written once, whatever the number of turns that use it.
 * Values read back are checked by thread-blobs.ts like store items: digests, lengths, versions.
 */
import type { RunnableConfig } from "@langchain/core/runnables";
import type { BlobSpace } from "./thread-blobs.js";

/** The part of LangGraph's checkpointer interface blobs need. */
export interface BlobSaver {
  getTuple(config: RunnableConfig): Promise<{ metadata?: unknown } | undefined>;
  put(
    config: RunnableConfig,
    checkpoint: PrivateCheckpoint,
    metadata: PrivateMetadata,
    newVersions: Record<string, never>,
  ): Promise<RunnableConfig>;
}

interface PrivateCheckpoint {
  v: number;
  id: string;
  ts: string;
  channel_values: Record<string, never>;
  channel_versions: Record<string, never>;
  versions_seen: Record<string, never>;
}

interface PrivateMetadata {
  source: "update";
  step: number;
  parents: Record<string, never>;
  [VALUE_KEY]?: Record<string, unknown>;
}

const NAMESPACE_PREFIX = "__quickjs_native_blobs__:";
const VALUE_KEY = "quickjs_native_blob";
/** LangGraph's checkpoint format version these private checkpoints are written in. */
const CHECKPOINT_VERSION = 4;

function isBlobSaver(x: unknown): x is BlobSaver {
  return (
    typeof x === "object" &&
    x !== null &&
    typeof (x as BlobSaver).getTuple === "function" &&
    typeof (x as BlobSaver).put === "function"
  );
}

/** A run's checkpointer and the thread id it keeps the thread's checkpoints under. */
export interface CheckpointerBlobs {
  saver: BlobSaver;
  threadId: string;
}

/** True for {@link CheckpointerBlobs}, as opposed to a store. */
export function isCheckpointerBlobs(x: unknown): x is CheckpointerBlobs {
  return (
    typeof x === "object" &&
    x !== null &&
    isBlobSaver((x as CheckpointerBlobs).saver) &&
    typeof (x as CheckpointerBlobs).threadId === "string"
  );
}

// LangGraph's run-config key of the checkpointer the running graph writes to (CONFIG_KEY_CHECKPOINTER).
export const CHECKPOINTER_KEY = "__pregel_checkpointer";

/** The checkpointer of the run `configurable` belongs to, with its thread id, if it has one. */
export function checkpointerOf(configurable: Record<string, unknown> | undefined): CheckpointerBlobs | undefined {
  const saver = configurable?.[CHECKPOINTER_KEY];
  const threadId = configurable?.["thread_id"];
  return isBlobSaver(saver) && typeof threadId === "string" ? { saver, threadId } : undefined;
}

/** One thread's blobs of one slot as private checkpoints (see above). */
export class CheckpointerSpace implements BlobSpace {
  readonly #saver: BlobSaver;
  readonly #threadId: string;
  readonly #namespace: string;

  constructor({ saver, threadId }: CheckpointerBlobs, slot: string) {
    this.#saver = saver;
    this.#threadId = threadId;
    this.#namespace = `${NAMESPACE_PREFIX}${slot}`;
  }

  async get(keys: readonly string[]): Promise<(Record<string, unknown> | undefined)[]> {
    return Promise.all(
      keys.map(async (key) => {
        const tuple = await this.#saver.getTuple({
          configurable: { thread_id: this.#threadId, checkpoint_ns: this.#namespace, checkpoint_id: key },
        });
        const value = (tuple?.metadata as Record<string, unknown> | undefined)?.[VALUE_KEY];
        return typeof value === "object" && value !== null && !Array.isArray(value)
          ? (value as Record<string, unknown>)
          : undefined;
      }),
    );
  }

  async put(entries: readonly (readonly [string, Record<string, unknown> | null])[]): Promise<void> {
    const config = { configurable: { thread_id: this.#threadId, checkpoint_ns: this.#namespace } };
    await Promise.all(
      entries.map(([key, value]) => {
        const checkpoint: PrivateCheckpoint = {
          v: CHECKPOINT_VERSION,
          id: key,
          ts: new Date().toISOString(),
          channel_values: {},
          channel_versions: {},
          versions_seen: {},
        };
        const metadata: PrivateMetadata = {
          source: "update",
          step: -1,
          parents: {},
          ...(value === null ? {} : { [VALUE_KEY]: value }),
        };
        return this.#saver.put(config, checkpoint, metadata, {});
      }),
    );
  }
}
