/**
 * Durable evals in one process (the cross-process scenarios are in durable-processes.test.ts): a
 * drain stops an eval at its next call with its journal written, and another middleware sharing
 * the checkpointer resumes it without running a journaled call again; new evals are refused while
 * draining; a journal over its cap stops the eval before its next call; `durableEvals: false`
 * writes no journal.
 */
import { describe, expect, it } from "vitest";
import { createAgent } from "langchain";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { Command, MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import { ScriptedChatModel, callTool, contentText, reply, toolMessages } from "./support/agent.js";
import { trackedMiddleware } from "./support/tracked-middleware.js";
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

describe("a crash after a pause for review was answered", () => {
  it("resumes from the pause's record plus the journal of the answered run: the approved email and the calls after it never run twice", async () => {
    const saver = new MemorySaver();
    const ran: string[] = [];
    let drained: Promise<unknown> | undefined;
    const code = `
await tools.step({ n: 1 });
await tools.sendEmail({ to: "a@example.com" });
await tools.step({ n: 2 });
await tools.step({ n: 3 });
"all sent"`;
    const agentOf = (script: BaseMessage[], drainAt?: number) => {
      const step = tool(
        async ({ n }: { n: number }) => {
          ran.push(`step ${n}`);
          if (n === drainAt) drained = interpreter.drain({ deadlineMs: 0 });
          return `step ${n}`;
        },
        { name: "step", description: "One step.", schema: z.object({ n: z.number() }) },
      );
      const sendEmail = tool(
        async ({ to }: { to: string }) => {
          ran.push(`email ${to}`);
          return "sent";
        },
        { name: "send_email", description: "Sends an email.", schema: z.object({ to: z.string() }) },
      );
      const interpreter = trackedMiddleware({
        ptc: [step, sendEmail],
        interruptOn: { send_email: true },
        snapshotSigningKey: "a-signing-key-of-at-least-16-bytes",
      });
      const model = new ScriptedChatModel(script);
      return createAgent({ model, tools: [step, sendEmail], middleware: [interpreter], checkpointer: saver });
    };
    const config = { configurable: { thread_id: "approved-then-killed" } };
    const paused = await agentOf([callTool("eval", { code }, "eval-1"), reply("done")]).invoke(
      { messages: [new HumanMessage("go")] },
      config,
    );
    expect(paused["__interrupt__"]).toBeDefined();
    expect(ran).toEqual(["step 1"]);
    // Another process approves; it is drained (as a deploy would stop it) right after step 2.
    void agentOf([reply("done")], 2)
      .invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }), config)
      .catch(() => {});
    while (drained === undefined) await new Promise((resolve) => setTimeout(resolve, 5));
    await drained;
    expect(ran).toEqual(["step 1", "email a@example.com", "step 2"]);
    // A third process continues the thread.
    const resumed = await agentOf([reply("done")]).invoke(null, config);
    expect(contentText(toolMessages(resumed["messages"] as BaseMessage[]).at(-1)!)).toMatch(/all sent/);
    expect(ran).toEqual(["step 1", "email a@example.com", "step 2", "step 3"]);
  });
});
