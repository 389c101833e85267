/**
 * Durable evals when LangGraph stores the checkpoint an eval runs on after the eval has started
 * (issue 31). With its default durability ("async"), LangGraph puts a step's checkpoint in the
 * background while the step's tasks already run; the eval's journal goes into pending writes of
 * that checkpoint, and a checkpointer such as PostgreSQL stores those writes even before the
 * checkpoint's own row. A process that dies then leaves writes no reader finds: the next process
 * resumes from the checkpoint before, LangGraph makes a new one for the eval, and every journaled
 * call runs again. `LaggingSaver` holds the put of that checkpoint the way a slow `put` does: no
 * timing, only the order in which the writes land.
 */
import { describe, expect, it } from "vitest";
import type { RunnableConfig } from "@langchain/core/runnables";
import { HumanMessage } from "@langchain/core/messages";
import {
  MemorySaver,
  type Checkpoint,
  type CheckpointMetadata,
  type CheckpointTuple,
  type PendingWrite,
} from "@langchain/langgraph-checkpoint";
import { durableAgent, evalText, type Made } from "./support/durable-agent.js";

const THREE_STEPS = `
const out = [];
for (let n = 1; n <= 3; n++) out.push(await tools.step({ n }));
out.join(", ")`;

/** True when `value` (a write to `messages`) holds the model's call of the eval tool. */
function asksForEval(value: unknown): boolean {
  return (Array.isArray(value) ? value : [value]).some((m) =>
    ((m as { tool_calls?: { name?: string }[] } | null)?.tool_calls ?? []).some((call) => call.name === "eval"),
  );
}

/**
 * A MemorySaver whose checkpoints from the model's call of the eval on (the first time it is
 * written) are stored late: their `put`s are held, in order, until {@link release}. With `releaseOnMiss`, a read that misses a
 * checkpoint releases them (the put lands while the reader waits for it).
 */
class LaggingSaver extends MemorySaver {
  #lagging = false;
  #armed = true;
  readonly #held: (() => void)[] = [];
  releaseOnMiss = false;

  override putWrites(config: RunnableConfig, writes: PendingWrite[], taskId: string, taskPath?: string) {
    if (this.#armed && writes.some(([channel, value]) => channel === "messages" && asksForEval(value))) {
      this.#armed = false;
      this.#lagging = true;
    }
    return super.putWrites(config, writes, taskId, taskPath);
  }

  override put(config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata) {
    if (!this.#lagging) return super.put(config, checkpoint, metadata);
    return new Promise<RunnableConfig>((resolve, reject) =>
      this.#held.push(() => void super.put(config, checkpoint, metadata).then(resolve, reject)),
    );
  }

  override async getTuple(config: RunnableConfig): Promise<CheckpointTuple | undefined> {
    const tuple = await super.getTuple(config);
    if (tuple === undefined && this.releaseOnMiss) this.release();
    return tuple;
  }

  /** The held checkpoints are stored, in order; later ones at once. */
  release(): void {
    this.#lagging = false;
    for (const put of this.#held.splice(0)) put();
  }

  /** What a process that dies now leaves: a saver holding only what is stored. */
  stored(): MemorySaver {
    const copy = new MemorySaver();
    copy.storage = structuredClone(this.storage);
    copy.writes = structuredClone(this.writes);
    return copy;
  }
}

describe("the checkpoint an eval runs on is stored late (async durability)", () => {
  it("call 2 starts only once the checkpoint holding call 1's journal is stored: a process continuing the thread from what was stored then never runs call 1 again", async () => {
    const saver = new LaggingSaver();
    const madeA: Made[] = [];
    let crashed: MemorySaver | undefined;
    const first = durableAgent(saver, madeA, THREE_STEPS, {
      onStep: (n) => {
        // Call 1 started: the held checkpoint lands once the journal looks for it.
        if (n === 1) saver.releaseOnMiss = true;
        // Call 2 started: what a process killed now leaves behind.
        if (n === 2) {
          crashed = saver.stored();
          saver.release();
        }
      },
    });
    const config = { configurable: { thread_id: "lagging" } };
    await first.agent.invoke({ messages: [new HumanMessage("go")] }, config);
    expect(madeA.map((m) => m.n)).toEqual([1, 2, 3]);

    const madeB: Made[] = [];
    const second = durableAgent(crashed!, madeB, THREE_STEPS, { resume: true });
    const result = await second.agent.invoke(null, config);
    expect(evalText(result)).toMatch(/step 1 , step 2 , step 3 /);
    // Call 2 was in flight at the crash (it runs once more, with its id); call 1 was journaled.
    expect(madeB.map((m) => m.n)).toEqual([2, 3]);
    expect(madeB.map((m) => m.id)).toEqual(["eval-1:ptc:2", "eval-1:ptc:3"]);
  });

  it('with durability "exit" (LangGraph stores the run only at its end) calls do not wait for the checkpoint: the eval runs to its end', async () => {
    const saver = new MemorySaver();
    const made: Made[] = [];
    const { agent } = durableAgent(saver, made, THREE_STEPS);
    const result = await agent.invoke(
      { messages: [new HumanMessage("go")] },
      { configurable: { thread_id: "exit" }, durability: "exit" },
    );
    expect(evalText(result)).toMatch(/step 1 , step 2 , step 3 /);
    expect(made.map((m) => m.n)).toEqual([1, 2, 3]);
  });
});
