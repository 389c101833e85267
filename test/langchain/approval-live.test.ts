/**
 * A resume in the process and session where the eval paused goes on with that same eval (issue 27
 * item 7c): closures made by earlier evals of the thread keep what they captured, which a replay
 * from the start snapshot cannot give back. Another eval of the thread, the wall budget (held while
 * a human decides) and the cap on paused evals kept alive decide when the resume replays instead.
 */
import { describe, expect, it } from "vitest";
import { createAgent } from "langchain";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { Command, MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import type { CodeInterpreterMiddlewareOptions } from "../../src/langchain/index.js";
import { MAX_LIVE_PAUSED_EVALS } from "../../src/langchain/approval.js";
import { ScriptedChatModel, callTool, contentText, reply, toolMessages } from "./support/agent.js";
import { trackedMiddleware } from "./support/tracked-middleware.js";

const approve = new Command({ resume: { decisions: [{ type: "approve" }] } });
const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** A closure over a local: a snapshot cannot carry it, so only the live session still has it. */
const MAKE_COUNTER = "globalThis.counter = (() => { let c = 0; return () => ++c; })(); counter(); counter()";
const SEND_THEN_COUNT = `await tools.sendEmail({ to: "a@example.com" }); counter()`;
const LIVE_RESULT = "<result>\n3\n</result>";
const REPLAYED = "ReferenceError: Value for 'counter' was not restored";

function mailer() {
  const sent: string[] = [];
  const sendEmail = tool(
    async ({ to }: { to: string }) => {
      sent.push(to);
      return `sent to ${to}`;
    },
    {
      name: "send_email",
      description: "Sends an email.",
      schema: z.object({ to: z.string() }),
    },
  );
  return { sent, sendEmail };
}

/** An agent whose every thread runs MAKE_COUNTER, then SEND_THEN_COUNT (paused for review), `threads` times over. */
function counterAgent(threads: number, options: CodeInterpreterMiddlewareOptions = {}) {
  const { sent, sendEmail } = mailer();
  const interpreter = trackedMiddleware({
    ptc: ["send_email"],
    interruptOn: { send_email: true },
    ...options,
  });
  const script = Array.from({ length: threads }, (_, i) => [
    callTool("eval", { code: MAKE_COUNTER }, `make-${i}`),
    callTool("eval", { code: SEND_THEN_COUNT }, `send-${i}`),
  ]).flat();
  const model = new ScriptedChatModel([...script, ...Array.from({ length: threads }, () => reply("done"))]);
  const agent = createAgent({ model, tools: [sendEmail], middleware: [interpreter], checkpointer: new MemorySaver() });
  return { agent, interpreter, sendEmail, sent };
}

const configOf = (thread: string) => ({ configurable: { thread_id: thread } });

async function pause(agent: ReturnType<typeof counterAgent>["agent"], thread: string): Promise<void> {
  const first = await agent.invoke({ messages: [new HumanMessage("go")] }, configOf(thread));
  expect((first["__interrupt__"] as unknown[] | undefined)?.length).toBe(1);
}

async function resume(agent: ReturnType<typeof counterAgent>["agent"], thread: string): Promise<string> {
  const resumed = await agent.invoke(approve, configOf(thread));
  return contentText(toolMessages(resumed["messages"] as BaseMessage[]).at(-1)!);
}

describe("a resume in the process where the eval paused", () => {
  it("a closure made by an earlier eval keeps its captured state after the approved call", async () => {
    const { agent, sent } = counterAgent(1);
    await pause(agent, "live-closure");
    expect(await resume(agent, "live-closure")).toContain(LIVE_RESULT);
    expect(sent).toEqual(["a@example.com"]);
  });

  it("an eval that pauses twice goes on both times, each call getting its own decision, its closures intact", async () => {
    const { sent, sendEmail } = mailer();
    const interpreter = trackedMiddleware({ ptc: ["send_email"], interruptOn: { send_email: true } });
    const code = `const a = await tools.sendEmail({ to: "a@example.com" }); const b = await tools.sendEmail({ to: "b@example.com" }); [a, b, counter()].join(" | ")`;
    const model = new ScriptedChatModel([
      callTool("eval", { code: MAKE_COUNTER }, "make"),
      callTool("eval", { code }, "twice"),
      reply("done"),
    ]);
    const agent = createAgent({
      model,
      tools: [sendEmail],
      middleware: [interpreter],
      checkpointer: new MemorySaver(),
    });
    await pause(agent, "twice");
    const second = await agent.invoke(approve, configOf("twice"));
    expect(
      (second["__interrupt__"] as { value: { actionRequests: { args: unknown }[] } }[])[0]?.value.actionRequests[0]
        ?.args,
    ).toEqual({ to: "b@example.com" });
    // The second decision differs from the first: given to the wrong call, the test would tell.
    const edit = new Command({
      resume: { decisions: [{ type: "edit", editedAction: { name: "send_email", args: { to: "c@example.com" } } }] },
    });
    const done = await agent.invoke(edit, configOf("twice"));
    const text = contentText(toolMessages(done["messages"] as BaseMessage[]).at(-1)!);
    expect(text).toContain("<result>\nsent to a@example.com | sent to c@example.com | 3\n</result>");
    expect(sent).toEqual(["a@example.com", "c@example.com"]);
  });

  it("a human wait longer than the wall budget does not stop the paused eval", async () => {
    const { agent, sent } = counterAgent(1, { executionTimeoutMs: 1000, wallTimeoutMs: 1000 });
    await pause(agent, "slow-human");
    await sleep(2500);
    expect(await resume(agent, "slow-human")).toContain(LIVE_RESULT);
    expect(sent).toEqual(["a@example.com"]);
  });

  it("another eval of the thread stops the paused eval first, and the resume replays; nothing runs twice", async () => {
    const { agent, interpreter, sendEmail, sent } = counterAgent(1);
    await pause(agent, "interleaved");
    // Another agent sharing the middleware (and so the thread's session), with its own checkpointer.
    const other = createAgent({
      model: new ScriptedChatModel([callTool("eval", { code: "1 + 1" }, "other-1"), reply("done")]),
      tools: [sendEmail],
      middleware: [interpreter],
      checkpointer: new MemorySaver(),
    });
    const between = await other.invoke({ messages: [new HumanMessage("go")] }, configOf("interleaved"));
    expect(contentText(toolMessages(between["messages"] as BaseMessage[]).at(-1)!)).toContain("<result>\n2\n</result>");
    expect(await resume(agent, "interleaved")).toContain(REPLAYED);
    expect(sent).toEqual(["a@example.com"]);
  });

  it("a paused eval whose session is evicted is stopped with it, and its resume replays; nothing runs twice", async () => {
    const { agent, sent } = counterAgent(2, { maxLiveSessions: 1 });
    await pause(agent, "evicted");
    // A second thread over maxLiveSessions 1 evicts the first thread's idle session, sandbox and paused eval.
    await pause(agent, "evicting");
    expect(await resume(agent, "evicted")).toContain(REPLAYED);
    expect(sent).toEqual(["a@example.com"]);
  });

  it(`past ${MAX_LIVE_PAUSED_EVALS} paused evals kept alive, the oldest is stopped and its resume replays`, async () => {
    const threads = MAX_LIVE_PAUSED_EVALS + 1;
    const { agent, sent } = counterAgent(threads);
    for (let i = 0; i < threads; i++) await pause(agent, `capped-${i}`);
    expect(await resume(agent, "capped-0")).toContain(REPLAYED);
    expect(await resume(agent, `capped-${threads - 1}`)).toContain(LIVE_RESULT);
    expect(sent).toEqual(["a@example.com", "a@example.com"]);
  }, 60_000);
});
