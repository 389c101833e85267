/**
 * Durable evals in one process (the cross-process scenarios are in durable-processes.test.ts): a
 * drain stops an eval at its next call with its journal written, and another middleware sharing
 * the checkpointer resumes it without running a journaled call again; new evals are refused while
 * draining; a journal over its cap stops the eval before its next call; `durableEvals: false`
 * writes no journal.
 */
import { describe, expect, it } from "vitest";
import { HumanMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { drainedRun, durableAgent, evalText, FIVE_STEPS, writesOf, type Made } from "./support/durable-agent.js";

describe("a drained eval", () => {
  it("stops at its next call with its journal written; another middleware on the checkpointer resumes it: journaled calls never run again, every call keeps its id", async () => {
    const saver = new MemorySaver();
    const made: Made[] = [];
    const { drained } = await drainedRun(saver, made, "drained", 2);
    expect(drained).toEqual({ stopped: 1 });
    expect(made.map((m) => m.n)).toEqual([1, 2]);
    const second = durableAgent(saver, made, FIVE_STEPS, { resume: true });
    const result = await second.agent.invoke(null, { configurable: { thread_id: "drained" } });
    expect(evalText(result)).toMatch(/step 1 , step 2 , step 3 , step 4 , step 5 /);
    expect(evalText(result)).toMatch(/tool calls: step ×5/);
    expect(made.map((m) => m.n)).toEqual([1, 2, 3, 4, 5]);
    expect(made.map((m) => m.id)).toEqual([1, 2, 3, 4, 5].map((n) => `eval-1:ptc:${n}`));
  });

  it("refuses new evals of the draining middleware with a message saying so; their code does not run", async () => {
    const saver = new MemorySaver();
    const made: Made[] = [];
    const { first } = await drainedRun(saver, made, "draining", 1);
    const next = durableAgent(saver, made, FIVE_STEPS, { middleware: first.interpreter });
    const again = await next.agent.invoke(
      { messages: [new HumanMessage("go")] },
      { configurable: { thread_id: "other" } },
    );
    expect(evalText(again)).toMatch(/^DurableEvalError: this server is shutting down and takes no new evals/);
    expect(made.map((m) => m.n)).toEqual([1]);
  });
});

describe("the journal's cap", () => {
  it("a call whose result takes the journal over maxSnapshotBytes stops the eval before its next call, with an error saying why", async () => {
    const saver = new MemorySaver();
    const made: Made[] = [];
    const code = `
await tools.step({ n: 1 });
await tools.step({ n: 2, size: 400000 });
await tools.step({ n: 3 });`;
    const { agent } = durableAgent(saver, made, code, { maxSnapshotBytes: 300_000 });
    const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: "cap" } });
    expect(evalText(result)).toMatch(
      /^DurableEvalError: the eval's calls can no longer be journaled \(the eval's call journal and start state take \d+ bytes, over maxSnapshotBytes \(300000\)\)/,
    );
    expect(made.map((m) => m.n)).toEqual([1, 2]);
  });
});

describe("durableEvals: false", () => {
  it("writes no journal to the checkpointer", async () => {
    const saver = new MemorySaver();
    const made: Made[] = [];
    const { agent } = durableAgent(saver, made, FIVE_STEPS, { durableEvals: false });
    await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: "off" } });
    expect(made).toHaveLength(5);
    const journal = (s: MemorySaver) => writesOf(s).filter(([task]) => task.startsWith("code-interpreter-journal:"));
    expect(journal(saver)).toEqual([]);
    // The same eval with the default journals its calls: a head and a batch per call.
    const onSaver = new MemorySaver();
    const on = durableAgent(onSaver, [], FIVE_STEPS);
    await on.agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: "on" } });
    expect(journal(onSaver).map(([task]) => task)).toEqual([
      "code-interpreter-journal:eval-1:0:head",
      ...[0, 1, 2, 3, 4].map((k) => `code-interpreter-journal:eval-1:0:${k}`),
    ]);
  });
});
