// Hazard: storing a thread's state after a run, or a paused eval's journal, does work on the Node
// main thread that grows with guest-controlled data. Resealing the last good snapshot for the new
// turn checked and signed it whole (three digests and a copy of a 200,000-row state: 40-60 ms in
// one go), and the store's chunker cut and hashed a 50 MB journal in one go (100-150 ms). Each now
// lets the event loop turn between bounded slices.
import { randomBytes } from "node:crypto";
import { InMemoryStore } from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import { resealSnapshot } from "../../src/index.js";
import { ThreadBlobs } from "../../src/langchain/thread-blobs.js";
import { sandbox, turnsWhile } from "./harness.js";

const MiB = 1024 * 1024;

describe("storing state lets the event loop turn between slices", () => {
  it("resealing a large snapshot for a new turn checks and signs it a slice per turn of the event loop", async () => {
    const source = sandbox({ memoryLimitBytes: 64 * MiB });
    source.evalSync("globalThis.big = 'x'.repeat(8 * 1024 * 1024); 0");
    const bytes = source.snapshot({ maxSnapshotBytes: 32 * MiB });
    const signing = { key: Buffer.alloc(32, 7), threadId: "thread:t", turn: 2 };
    const { turns, settled } = await turnsWhile(resealSnapshot(bytes, { maxSnapshotBytes: 32 * MiB, signing }));
    expect(settled.status).toBe("fulfilled");
    const resealed = (settled as PromiseFulfilledResult<Uint8Array>).value;
    // 8 MB verified, then 8 MB sealed, 512 KiB per slice: done at once, no turn came between.
    expect(turns).toBeGreaterThanOrEqual(24);
    // The same state, now signed for the turn.
    await expect(resealSnapshot(resealed, { maxSnapshotBytes: 32 * MiB, from: signing })).resolves.toHaveLength(
      resealed.length,
    );
  });

  it("a large blob is cut into chunks and hashed a slice per turn before the store is asked anything", async () => {
    const store = new InMemoryStore();
    const batch = store.batch.bind(store);
    let turns = 0;
    let done = false;
    const tick = (): void => {
      if (done) return;
      turns++;
      setImmediate(tick);
    };
    let turnsAtFirstStoreCall: number | undefined;
    store.batch = ((ops: Parameters<typeof batch>[0]) => {
      turnsAtFirstStoreCall ??= turns;
      return batch(ops);
    }) as typeof store.batch;
    setImmediate(tick);
    const bytes = randomBytes(8 * MiB);
    const blobs = new ThreadBlobs(store, "thread-a", "journal", 4);
    const ref = await blobs.write(bytes);
    done = true;
    // Chunking and hashing 8 MB in one go asked the store with no turn in between.
    expect(turnsAtFirstStoreCall).toBeGreaterThanOrEqual(10);
    expect(Buffer.compare(Buffer.from(await blobs.read(ref, 16 * MiB)), bytes)).toBe(0);
  });

  it("a blob deflated on the calling thread gives the event loop a turn every slice", async () => {
    // Up to 1 MiB, chunks are deflated inline (cheaper than the thread pool's round trips).
    const bytes = randomBytes(MiB);
    const blobs = new ThreadBlobs(new InMemoryStore(), "thread-b", "snapshot", 4);
    const { turns, settled } = await turnsWhile(blobs.write(bytes));
    expect(settled.status).toBe("fulfilled");
    // 1 MiB cut, hashed and deflated in 512 KiB slices; in one go, no turn came between.
    expect(turns).toBeGreaterThanOrEqual(2);
  });
});
