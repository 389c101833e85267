/**
 * Attacks on the journal a durable eval writes as it goes (issue 31), by whoever can write the
 * checkpointer: signed batches moved to another place in the sequence or into another thread, and
 * a stored piece far larger than the cap. Each is refused before it is used, and nothing runs again.
 */
import { describe, expect, it } from "vitest";
import { MemorySaver } from "@langchain/langgraph";
import { drainedRun, durableAgent, evalText, FIVE_STEPS, type Made } from "../langchain/support/durable-agent.js";

const BATCH = /^code-interpreter-journal:eval-1:0:(\d+)$/;

/** The stored batch rows of `thread`'s eval, by batch number. */
function batchesOf(saver: MemorySaver, thread: string): Map<number, [string, string, unknown, string]> {
  const rows = Object.entries(
    (saver as unknown as { writes: Record<string, Record<string, [string, string, unknown, string]>> }).writes,
  )
    .filter(([outer]) => outer.includes(thread))
    .flatMap(([, inner]) => Object.values(inner));
  return new Map(rows.filter(([task]) => BATCH.test(task)).map((row) => [Number(BATCH.exec(row[0])![1]), row]));
}

async function resume(saver: MemorySaver, made: Made[], thread: string, maxSnapshotBytes?: number): Promise<string> {
  const next = durableAgent(saver, made, FIVE_STEPS, {
    resume: true,
    ...(maxSnapshotBytes === undefined ? {} : { maxSnapshotBytes }),
  });
  return evalText(await next.agent.invoke(null, { configurable: { thread_id: thread } }));
}

describe("a signed batch of a durable eval's journal moved by whoever can write the checkpointer", () => {
  it("is refused when swapped with another batch of the same journal: the resume says so and runs nothing", async () => {
    const saver = new MemorySaver();
    const made: Made[] = [];
    await drainedRun(saver, made, "swapped", 3);
    const batches = batchesOf(saver, "swapped");
    expect(batches.size).toBe(3);
    const [zero, one] = [batches.get(0)!, batches.get(1)!];
    [zero[2], one[2]] = [one[2], zero[2]];
    const text = await resume(saver, made, "swapped");
    expect(text).toMatch(/^DurableEvalError: this eval was interrupted .* signature does not match/);
    expect(made.map((m) => m.n)).toEqual([1, 2, 3]);
  });

  it("is refused when copied from another thread's journal of the same eval call id", async () => {
    const saver = new MemorySaver();
    const made: Made[] = [];
    await drainedRun(saver, made, "thread-a", 2);
    await drainedRun(saver, made, "thread-b", 2);
    batchesOf(saver, "thread-b").get(1)![2] = batchesOf(saver, "thread-a").get(1)![2];
    const text = await resume(saver, made, "thread-b");
    expect(text).toMatch(/^DurableEvalError: .* signature does not match/);
    expect(made.map((m) => m.n)).toEqual([1, 2, 1, 2]);
  });
});

describe("a stored journal piece far over the cap", () => {
  it("is refused by its declared size before it is decoded", async () => {
    const saver = new MemorySaver();
    const made: Made[] = [];
    await drainedRun(saver, made, "huge", 2);
    const [, bytes] = await saver.serde.dumpsTyped("A".repeat(8 * 1024 * 1024));
    batchesOf(saver, "huge").get(0)![2] = bytes;
    const text = await resume(saver, made, "huge", 1024 * 1024);
    expect(text).toMatch(/^DurableEvalError: .*over maxSnapshotBytes \(1048576\)/);
    expect(made.map((m) => m.n)).toEqual([1, 2]);
  });
});
