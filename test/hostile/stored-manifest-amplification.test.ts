/**
 * A store writer lists many large chunks under a small declared length in a blob manifest. The
 * reader must refuse it before inflating or fetching more than that length allows, not join every
 * chunk (32x the cap) and compare lengths afterwards.
 */
import { createHash } from "node:crypto";
import { deflateRawSync } from "node:zlib";
import { describe, expect, it } from "vitest";
import { InMemoryStore, type Operation } from "@langchain/langgraph";
import { ThreadBlobs } from "../../src/langchain/thread-blobs.js";

const digestOf = (bytes: Uint8Array) => createHash("sha256").update(bytes).digest("hex").slice(0, 32);
const CHUNK = 64 * 1024;
const DECLARED = 1024 * 1024;

/** A store holding the crafted manifest; counts the chunks read from it. */
async function craftedStore(chunkList: (digests: string[]) => string[], distinct: number) {
  const store = new InMemoryStore();
  const blobs = new ThreadBlobs(store, "t", "snapshot", 4);
  await blobs.write(Buffer.from("seed")); // makes the slot's namespace
  const [seed] = await store.search([], { limit: 10 });
  const namespace = seed!.namespace;
  const digests: string[] = [];
  for (let i = 0; i < distinct; i++) {
    const piece = Buffer.alloc(CHUNK, i % 251);
    piece.writeUInt32LE(i, 0);
    const digest = digestOf(piece);
    digests.push(digest);
    await store.put(namespace, `chunk:${digest}`, { v: 1, z: deflateRawSync(piece).toString("base64") });
  }
  const manifest = { v: 1, bytes: DECLARED, chunks: chunkList(digests) };
  const ref = digestOf(Buffer.from(JSON.stringify(manifest), "utf8"));
  await store.put(namespace, `blob:${ref}`, manifest);
  let chunkReads = 0;
  const batch = store.batch.bind(store);
  store.batch = (async (ops: Operation[]) => {
    chunkReads += ops.filter((op) => "key" in op && !("value" in op) && op.key.startsWith("chunk:")).length;
    return batch(ops);
  }) as typeof store.batch;
  return { blobs, ref, reads: () => chunkReads };
}

describe("a manifest listing more chunk bytes than its declared length", () => {
  it("is refused at the first overflowing chunk, before the other distinct chunks are read", async () => {
    // 1 MiB declared, 512 distinct 64 KiB chunks listed (32 MiB): the count passes the cheap check.
    const { blobs, ref, reads } = await craftedStore((d) => d, DECLARED / 2048);
    await expect(blobs.read(ref, DECLARED)).rejects.toThrow(/more than its declared length/);
    expect(reads()).toBeLessThanOrEqual(32);
  });

  it("is refused when one valid chunk is listed 512 times, without joining them", async () => {
    const { blobs, ref } = await craftedStore((d) => Array.from({ length: DECLARED / 2048 }, () => d[0]!), 1);
    const concat = Buffer.concat;
    let joined = 0;
    Buffer.concat = ((list: readonly Uint8Array[], total?: number) => {
      const out = concat(list, total);
      joined = Math.max(joined, out.length);
      return out;
    }) as typeof Buffer.concat;
    try {
      await expect(blobs.read(ref, DECLARED)).rejects.toThrow(/more than its declared length/);
    } finally {
      Buffer.concat = concat;
    }
    expect(joined).toBeLessThanOrEqual(DECLARED);
  });

  it("a manifest whose chunk count cannot fit its length is refused before any chunk is read", async () => {
    const { blobs, ref, reads } = await craftedStore(
      (d) => Array.from({ length: DECLARED / 2048 + 1 }, () => d[0]!),
      1,
    );
    await expect(blobs.read(ref, DECLARED)).rejects.toThrow(/malformed chunks/);
    expect(reads()).toBe(0);
  });
});
