// Hazard: a live eval with a reviewed tool in reach journals every host call that settles, for the
// record it stores if it pauses. The journal held each outcome decoded, as the tool returned it:
// with 500 tool results of 100 KB before a pause (a 49 MB journal), every young-generation
// collection copied them on the Node main thread (41-52 ms of main-thread CPU in one 5 ms
// interval). A settled call is now serialized when it settles, as the record stores it, and its
// outcome decoded only when read; the caller's own outcome (its state updates included) is the
// tool's, untouched. The outcome asserted is the JavaScript heap the paused eval holds, and that
// the resumed eval answers the journaled calls from what was held, running none of them again.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { afterEach, describe, expect, it } from "vitest";
import { createAgent, createMiddleware } from "langchain";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { Command, InMemoryStore, MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import { createCodeInterpreterMiddleware, type CodeInterpreterMiddleware } from "../../src/langchain/index.js";
import { ScriptedChatModel, callTool, contentText, reply, toolMessages } from "../langchain/support/agent.js";

setFlagsFromString("--expose-gc");
const collect = runInNewContext("gc") as () => void;
const MiB = 1024 * 1024;
const CALLS = 200;
const RESULT_CHARS = 100 * 1024;

const live: CodeInterpreterMiddleware[] = [];
afterEach(() => {
  for (const m of live.splice(0)) m.dispose();
});

describe("a paused eval's settled results", () => {
  it("are held serialized, not as live objects on the JavaScript heap, and answer the replay once resumed", async () => {
    const fetched: number[] = [];
    const sent: unknown[] = [];
    const fetchPage = tool(
      async ({ n }: { n: number }) => {
        fetched.push(n);
        return `${n}`.padEnd(RESULT_CHARS, ".");
      },
      { name: "fetch_page", description: "Fetches a page.", schema: z.object({ n: z.number() }) },
    );
    const sendEmail = tool(
      async (args: Record<string, unknown>) => {
        sent.push(args);
        return "sent";
      },
      { name: "send_email", description: "Sends an email.", schema: z.object({ to: z.string() }) },
    );
    const interpreter = createCodeInterpreterMiddleware({
      ptc: [sendEmail, fetchPage],
      interruptOn: { send_email: true },
      memoryLimitBytes: 256 * MiB,
      maxSnapshotBytes: 128 * MiB,
      executionTimeoutMs: 30_000,
      wallTimeoutMs: 60_000,
      maxPtcCalls: CALLS + 1,
    });
    live.push(interpreter);
    const code = `
let total = 0;
for (let i = 0; i < ${CALLS}; i++) total += (await tools.fetchPage({ n: i })).length;
await tools.sendEmail({ to: "a@example.com" });
total`;
    const model = new ScriptedChatModel([callTool("eval", { code }, "eval-1"), reply("done")]);
    const agent = createAgent({
      model,
      tools: [sendEmail, fetchPage],
      middleware: [interpreter],
      checkpointer: new MemorySaver(),
      store: new InMemoryStore(),
    });
    const config = { configurable: { thread_id: "held" }, recursionLimit: 50 };

    collect();
    const before = process.memoryUsage().heapUsed;
    const paused = await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    expect(paused.__interrupt__).toBeDefined();
    collect();
    const held = process.memoryUsage().heapUsed - before;
    // Held decoded, the 20 MB of results stayed on the heap while the eval waited for review.
    expect(held).toBeLessThan(10_000_000);
    expect(fetched).toHaveLength(CALLS);

    const resumed = await agent.invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }), config);
    const text = contentText(toolMessages(resumed["messages"] as BaseMessage[]).at(-1)!);
    expect(text).toContain(`${CALLS * RESULT_CHARS}`);
    expect(fetched).toHaveLength(CALLS);
    expect(sent).toEqual([{ to: "a@example.com" }]);
  }, 240_000);

  it("leave the state updates a tool's Command asked for as the tool made them (class instances keep their prototype)", async () => {
    class Note {
      constructor(readonly text: string) {}
      shout(): string {
        return this.text.toUpperCase();
      }
    }
    const notes = createMiddleware({ name: "Notes", stateSchema: z.object({ note: z.any().optional() }) });
    const takeNote = tool(async () => new Command({ update: { note: new Note("kept") } }), {
      name: "take_note",
      description: "Takes a note.",
      schema: z.object({}),
    });
    const sendEmail = tool(async () => "sent", {
      name: "send_email",
      description: "Sends an email.",
      schema: z.object({ to: z.string() }),
    });
    const interpreter = createCodeInterpreterMiddleware({
      ptc: [sendEmail, takeNote],
      interruptOn: { send_email: true },
    });
    live.push(interpreter);
    const model = new ScriptedChatModel([
      callTool("eval", { code: "await tools.takeNote({}); 1" }, "eval-1"),
      reply("done"),
    ]);
    const agent = createAgent({
      model,
      tools: [sendEmail, takeNote],
      middleware: [notes, interpreter],
      checkpointer: new MemorySaver(),
    });
    const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: "notes" } });
    const note = (result as Record<string, unknown>)["note"];
    expect(note).toBeInstanceOf(Note);
    expect((note as Note).shout()).toBe("KEPT");
  }, 120_000);
});
