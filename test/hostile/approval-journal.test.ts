/**
 * Attacks on human review of calls from code (issue 27, items 3 and 6): a signed journal record
 * moved to another pause by whoever can write the checkpointer, and guest arguments the reviewer
 * would see otherwise than the tool gets them; and approval work whose cost grows with the
 * interpreter state or the journal, done on the shared main thread (item 5).
 */
import { afterEach, describe, expect, it, vi } from "vitest";
import { createAgent } from "langchain";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { Command, MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import { Sandbox } from "../../src/index.js";
import { createCodeInterpreterMiddleware, type CodeInterpreterMiddleware } from "../../src/langchain/index.js";
import { decodeRecord, encodeRecord, type ReplayRecord } from "../../src/langchain/journal.js";
import { ScriptedChatModel, callTool, contentText, reply, toolMessages } from "../langchain/support/agent.js";
import { turnsWhile } from "./harness.js";

const live: CodeInterpreterMiddleware[] = [];
afterEach(() => {
  for (const m of live.splice(0)) m.dispose();
});

function mailAgent(code: string, saver = new MemorySaver()) {
  const sent: unknown[] = [];
  const sendEmail = tool(
    async (args: Record<string, unknown>) => {
      sent.push(args);
      return "sent";
    },
    {
      name: "send_email",
      description: "Sends an email.",
      schema: z.object({ to: z.any() }).passthrough(),
    },
  );
  const interpreter = createCodeInterpreterMiddleware({
    ptc: [sendEmail],
    interruptOn: { send_email: true },
    snapshotSigningKey: "a-signing-key-of-at-least-16-bytes",
  });
  live.push(interpreter);
  const model = new ScriptedChatModel([callTool("eval", { code }, "eval-1"), reply("done")]);
  const agent = createAgent({ model, tools: [sendEmail], middleware: [interpreter], checkpointer: saver });
  return { agent, sent, saver };
}

function evalText(result: Record<string, unknown>): string {
  return contentText(toolMessages(result["messages"] as BaseMessage[]).at(-1)!);
}

const approve = new Command({ resume: { decisions: [{ type: "approve" }] } });

/** MemorySaver's pending writes: `[taskId, channel, value, path]` by outer and inner key. */
type Writes = Record<string, Record<string, [string, string, unknown, string]>>;

describe("a signed journal record moved to another pause", () => {
  it("is refused: the record of pause 0 copied into the row of pause 1 does not send the approved email again", async () => {
    const code = `
await tools.sendEmail({ to: "a@example.com" });
await tools.sendEmail({ to: "b@example.com" });`;
    const { agent, sent, saver } = mailAgent(code);
    const config = { configurable: { thread_id: "moved" } };
    await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    await agent.invoke(approve, config);
    expect(sent).toEqual([{ to: "a@example.com" }]);
    // Whoever can write the checkpointer puts the signed record of pause 0 where pause 1's is read.
    const rows = Object.values((saver as unknown as { writes: Writes }).writes).flatMap((byInner) =>
      Object.values(byInner),
    );
    // (Records of this size are one piece, `…:<pause>:0`.)
    const pause0 = rows.find(([taskId]) => /^code-interpreter-replay:eval-1:0(:0)?$/.test(taskId));
    const pause1 = rows.find(([taskId]) => /^code-interpreter-replay:eval-1:1(:0)?$/.test(taskId));
    expect(pause0).toBeDefined();
    expect(pause1).toBeDefined();
    pause1![2] = pause0![2];
    const resumed = await agent.invoke(approve, config);
    expect(evalText(resumed)).toMatch(
      /^ApprovalError: the review was answered, but the paused eval cannot be resumed \(the stored journal's signature does not match/,
    );
    expect(sent).toEqual([{ to: "a@example.com" }]);
  });
});

describe("arguments of a reviewed call that the reviewer cannot see as the tool would get them", () => {
  it("are refused in the guest with a TypeError naming the part, before any review; nothing is sent", async () => {
    const code = `
const attempts = {
  set: { to: new Set(["everyone@corp.example"]) },
  map: { to: new Map([["a", 1]]) },
  bytes: { to: new Uint8Array([1, 2]) },
  error: { to: new Error("x") },
  date: { to: new Date(0) },
  nan: { to: "a", n: NaN },
  negativeZero: { to: "a", n: -0 },
  infinity: { to: "a", n: Infinity },
  undefinedField: { to: "a", cc: undefined },
  nested: { to: ["a", { deep: new Set() }] },
  bigint: { to: "a", n: 1n },
};
const out = {};
for (const [name, args] of Object.entries(attempts)) {
  try { await tools.sendEmail(args); out[name] = "ran"; } catch (e) { out[name] = e.name + ": " + e.message; }
}
out`;
    const { agent, sent } = mailAgent(code);
    const result = await agent.invoke(
      { messages: [new HumanMessage("go")] },
      { configurable: { thread_id: "unfaithful" } },
    );
    expect(result["__interrupt__"]).toBeUndefined();
    expect(sent).toEqual([]);
    const text = evalText(result);
    for (const part of [
      "args.to is a Set",
      "args.to is a Map",
      "args.to is a Uint8Array",
      "args.to is an Error",
      "args.to is a Date",
      "args.n is NaN",
      "args.n is -0",
      "args.n is Infinity",
      "args.cc is undefined",
      "args.to[1].deep is a Set",
      "args.n is a bigint",
    ]) {
      expect(text).toContain(
        `TypeError: send_email needs human review, and the reviewer sees its arguments as JSON, but ${part}`,
      );
    }
    expect(text).not.toContain("ran");
  });

  it("plain data still pauses, and the tool gets what the reviewer was shown", async () => {
    const { agent, sent } = mailAgent(
      `await tools.sendEmail({ to: ["a@example.com"], meta: { n: 1.5, ok: true, none: null } })`,
    );
    const config = { configurable: { thread_id: "faithful" } };
    const first = await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    const shown = (
      first["__interrupt__"] as { value: { actionRequests: { args: unknown; description: string }[] } }[]
    )[0]!.value.actionRequests[0]!;
    const resumed = await agent.invoke(approve, config);
    expect(evalText(resumed)).toContain("sent");
    expect(sent).toEqual([shown.args]);
    expect(JSON.parse(shown.description.slice(shown.description.indexOf("Args: ") + 6))).toEqual(sent[0]);
  });
});

describe("approval work on the main thread (issue 27.5)", () => {
  it("the start snapshot of an eval with a reviewed tool in reach is taken on an executor thread, never inline", async () => {
    const inline = vi.spyOn(Sandbox.prototype, "snapshot");
    const offThread = vi.spyOn(Sandbox.prototype, "snapshotAsync");
    try {
      const { agent } = mailAgent("globalThis.rows = Array.from({ length: 1000 }, (_, i) => ({ i })); 1 + 1");
      const result = await agent.invoke(
        { messages: [new HumanMessage("go")] },
        { configurable: { thread_id: "start-snapshot" } },
      );
      expect(evalText(result)).toContain("<result>\n2\n</result>");
      expect(inline).not.toHaveBeenCalled();
      expect(offThread).toHaveBeenCalled();
    } finally {
      inline.mockRestore();
      offThread.mockRestore();
    }
  });

  it("encoding and decoding a large journal let the event loop turn between entries and slices", async () => {
    const binding = {
      key: new TextEncoder().encode("a-signing-key-of-at-least-16-bytes"),
      threadId: "thread:t",
      evalCallId: "eval-1",
    };
    const entries = Array.from({ length: 200 }, (_, position) => ({
      kind: "tool" as const,
      name: "fetch",
      args: { position },
      position,
      reviewed: false,
      outcome: { ok: true as const, value: "x".repeat(20_000), updates: [] },
    }));
    const record: ReplayRecord = {
      codeDigest: "c",
      clockMs: 0,
      randomSeed: 1,
      consoleLines: 0,
      entries,
      pausedAt: { kind: "tool", name: "send_email", args: {}, position: 200 },
      startSnapshot: new Uint8Array(6 * 1024 * 1024),
    };
    const max = 64 * 1024 * 1024;
    const encoded = await turnsWhile(encodeRecord(record, binding, "slot", max));
    expect(encoded.settled.status).toBe("fulfilled");
    const pieces = (encoded.settled as PromiseFulfilledResult<string[]>).value;
    expect(encoded.turns).toBeGreaterThanOrEqual(100);
    const decoded = await turnsWhile(decodeRecord(pieces, binding, "slot", max));
    expect(decoded.settled.status).toBe("fulfilled");
    expect(decoded.turns).toBeGreaterThanOrEqual(100);
    expect((decoded.settled as PromiseFulfilledResult<ReplayRecord>).value.entries).toHaveLength(200);
  });
});
