/**
 * Human review of `tools.*` calls made from code (`interruptOn`), in one process with LangGraph's
 * MemorySaver: the eval pauses with the standard HITL request, resumes with
 * `Command({ resume: { decisions } })`, goes on (the same eval, or a replay of its earlier calls from
 * the journal), and never runs a call twice. The two-process version is approval-processes.test.ts.
 */
import { describe, expect, it } from "vitest";
import { createAgent } from "langchain";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { Command, MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import type { CodeInterpreterMiddlewareOptions } from "../../src/langchain/index.js";
import { ScriptedChatModel, callTool, contentText, reply, toolMessages } from "./support/agent.js";
import { trackedMiddleware } from "./support/tracked-middleware.js";

/** `lookup` and `send_email` tools that count their runs. */
function mailTools() {
  const lookups: string[] = [];
  const sent: { to: string; body: string }[] = [];
  const lookup = tool(
    async ({ name }: { name: string }) => {
      lookups.push(name);
      return { email: `${name}@example.com` };
    },
    {
      name: "lookup",
      description: "Finds a person's email address.",
      schema: z.object({ name: z.string() }),
    },
  );
  const sendEmail = tool(
    async ({ to, body }: { to: string; body: string }) => {
      sent.push({ to, body });
      return `sent to ${to}`;
    },
    {
      name: "send_email",
      description: "Sends an email.",
      schema: z.object({ to: z.string(), body: z.string() }),
    },
  );
  return { lookup, sendEmail, lookups, sent };
}

const LOOKUP_THEN_SEND = `
const who = await tools.lookup({ name: "ada" });
const receipt = await tools.sendEmail({ to: who.email, body: "hello" });
({ who: who.email, receipt })`;

function agentFor(
  code: string,
  options: CodeInterpreterMiddlewareOptions,
  extraTools: Parameters<typeof createAgent>[0]["tools"] = [],
) {
  const { lookup, sendEmail, lookups, sent } = mailTools();
  const checkpointer = new MemorySaver();
  const build = (
    script: ConstructorParameters<typeof ScriptedChatModel>[0],
    ptc: CodeInterpreterMiddlewareOptions["ptc"],
  ) => {
    const interpreter = trackedMiddleware({ ptc, ...options });
    const agent = createAgent({
      model: new ScriptedChatModel(script),
      tools: [lookup, sendEmail, ...(extraTools ?? [])],
      middleware: [interpreter],
      checkpointer,
    });
    return { agent, interpreter };
  };
  const { agent, interpreter } = build([callTool("eval", { code }, "eval-1"), reply("done")], ["lookup", "send_email"]);
  /** The agent as another process runs it: its own middleware, the same checkpointer; no paused eval is alive there, so a resume replays. */
  const elsewhere = () => build([reply("done")], [lookup, sendEmail]).agent;
  return { agent, lookups, sent, interpreter, elsewhere };
}

interface InterruptValue {
  actionRequests: { name: string; args: Record<string, unknown>; description: string }[];
  reviewConfigs: { actionName: string; allowedDecisions: string[] }[];
}

function interruptOf(result: Record<string, unknown>): InterruptValue | undefined {
  const interrupts = result["__interrupt__"] as { value: InterruptValue }[] | undefined;
  return interrupts?.[0]?.value;
}

function evalText(result: Record<string, unknown>): string {
  const evals = toolMessages(result["messages"] as BaseMessage[]);
  return contentText(evals.at(-1)!);
}

describe("interruptOn: tools called from code pause for review", () => {
  it("pauses at send_email with the standard HITL request; lookup ran once, nothing sent", async () => {
    const { agent, lookups, sent } = agentFor(LOOKUP_THEN_SEND, { interruptOn: { send_email: true } });
    const config = { configurable: { thread_id: "pause" } };
    const first = await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    const request = interruptOf(first);
    expect(request?.actionRequests).toEqual([
      {
        name: "send_email",
        args: { to: "ada@example.com", body: "hello" },
        description: expect.stringContaining("send_email"),
      },
    ]);
    expect(request?.reviewConfigs).toEqual([
      { actionName: "send_email", allowedDecisions: ["approve", "edit", "reject"] },
    ]);
    expect(lookups).toEqual(["ada"]);
    expect(sent).toEqual([]);

    const resumed = await agent.invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }), config);
    expect(interruptOf(resumed)).toBeUndefined();
    expect(lookups).toEqual(["ada"]);
    expect(sent).toEqual([{ to: "ada@example.com", body: "hello" }]);
    const text = evalText(resumed);
    expect(text).toContain("ada@example.com");
    expect(text).toContain("sent to ada@example.com");
  });

  it("reject: the guest catches an error carrying the reviewer's message; nothing is sent", async () => {
    const code = `
const who = await tools.lookup({ name: "ada" });
let outcome;
try { await tools.sendEmail({ to: who.email, body: "hello" }); outcome = "sent"; }
catch (e) { outcome = e.name + ": " + e.message; }
outcome`;
    const { agent, lookups, sent } = agentFor(code, { interruptOn: { send_email: true } });
    const config = { configurable: { thread_id: "reject" } };
    await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    const resumed = await agent.invoke(
      new Command({ resume: { decisions: [{ type: "reject", message: "not to Ada, please" }] } }),
      config,
    );
    expect(evalText(resumed)).toContain("ToolCallRejectedError: not to Ada, please");
    expect(sent).toEqual([]);
    expect(lookups).toEqual(["ada"]);
  });

  it("edit: the tool receives the edited arguments", async () => {
    const { agent, sent } = agentFor(LOOKUP_THEN_SEND, {
      interruptOn: { send_email: { allowedDecisions: ["approve", "edit"] } },
    });
    const config = { configurable: { thread_id: "edit" } };
    await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    const edited = {
      type: "edit",
      editedAction: { name: "send_email", args: { to: "grace@example.com", body: "hi" } },
    };
    const resumed = await agent.invoke(new Command({ resume: { decisions: [edited] } }), config);
    expect(sent).toEqual([{ to: "grace@example.com", body: "hi" }]);
    expect(evalText(resumed)).toContain("sent to grace@example.com");
  });

  it("two reviewed calls pause one after the other; after two approvals each ran exactly once", async () => {
    const code = `
const a = await tools.sendEmail({ to: "a@example.com", body: "1" });
const who = await tools.lookup({ name: "bob" });
const b = await tools.sendEmail({ to: who.email, body: "2" });
[a, b].join(" | ")`;
    const { agent, sent, lookups } = agentFor(code, { interruptOn: { send_email: true } });
    const config = { configurable: { thread_id: "two" } };
    const first = await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    expect(interruptOf(first)?.actionRequests[0]?.args).toEqual({ to: "a@example.com", body: "1" });
    const second = await agent.invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }), config);
    expect(interruptOf(second)?.actionRequests[0]?.args).toEqual({ to: "bob@example.com", body: "2" });
    expect(sent.map((m) => m.to)).toEqual(["a@example.com"]);
    const third = await agent.invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }), config);
    expect(interruptOf(third)).toBeUndefined();
    expect(sent.map((m) => m.to)).toEqual(["a@example.com", "bob@example.com"]);
    expect(lookups).toEqual(["bob"]);
    expect(evalText(third)).toContain("sent to a@example.com | sent to bob@example.com");
  });

  it("reviewed calls made at once are raised in call order, even when the first one's description takes longer", async () => {
    const code = `(await Promise.all([tools.sendEmail({ to: "a@example.com", body: "1" }), tools.sendEmail({ to: "b@example.com", body: "2" })])).join(" | ")`;
    const description = async (call: { args: Record<string, unknown> }) => {
      if (call.args["to"] === "a@example.com") await new Promise((resolve) => setTimeout(resolve, 50));
      return `mail to ${String(call.args["to"])}`;
    };
    const { agent, sent } = agentFor(code, {
      interruptOn: { send_email: { allowedDecisions: ["approve"], description } },
    });
    const config = { configurable: { thread_id: "concurrent" } };
    const first = await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    expect(interruptOf(first)?.actionRequests[0]?.description).toBe("mail to a@example.com");
    const second = await agent.invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }), config);
    expect(interruptOf(second)?.actionRequests[0]?.description).toBe("mail to b@example.com");
    const third = await agent.invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }), config);
    expect(evalText(third)).toContain("sent to a@example.com | sent to b@example.com");
    expect(sent.map((m) => m.to)).toEqual(["a@example.com", "b@example.com"]);
  });

  it("tools not listed in interruptOn never pause", async () => {
    const { agent, sent, lookups } = agentFor(LOOKUP_THEN_SEND, {
      interruptOn: { delete_file: true, send_email: false },
    });
    const result = await agent.invoke(
      { messages: [new HumanMessage("go")] },
      { configurable: { thread_id: "unlisted" } },
    );
    expect(interruptOf(result)).toBeUndefined();
    expect(lookups).toEqual(["ada"]);
    expect(sent).toHaveLength(1);
  });

  it("a humanInTheLoopMiddleware configuration is accepted as is, descriptionPrefix included", async () => {
    const hitl = {
      interruptOn: { send_email: { allowedDecisions: ["approve", "reject"] as ("approve" | "reject")[] } },
      descriptionPrefix: "Mail needs a human",
    };
    const { agent } = agentFor(LOOKUP_THEN_SEND, { interruptOn: hitl });
    const first = await agent.invoke(
      { messages: [new HumanMessage("go")] },
      { configurable: { thread_id: "hitl-config" } },
    );
    const request = interruptOf(first);
    expect(request?.actionRequests[0]?.description).toMatch(/^Mail needs a human\n\nTool: send_email\nArgs: /);
    expect(request?.reviewConfigs[0]?.allowedDecisions).toEqual(["approve", "reject"]);
  });

  it("Math.random and Date replay exactly: values drawn before the pause match after it", async () => {
    const code = `
const r = Math.random(), t = Date.now();
await tools.sendEmail({ to: "x@example.com", body: String(r) + "/" + t });
[r, t].join("/")`;
    const { agent, sent } = agentFor(code, { interruptOn: { send_email: true } });
    const config = { configurable: { thread_id: "random" } };
    const first = await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    const body = interruptOf(first)?.actionRequests[0]?.args["body"];
    const resumed = await agent.invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }), config);
    expect(sent).toEqual([{ to: "x@example.com", body }]);
    expect(evalText(resumed)).toContain(String(body));
  });

  it("a resumed eval that calls something else stops with ReplayDivergenceError; nothing runs twice", async () => {
    // With the real clock, Date.now() differs in the replay, and so does the lookup's argument.
    const code = `
await tools.lookup({ name: "t" + Date.now() });
await tools.sendEmail({ to: "z@example.com", body: "b" });`;
    const { agent, lookups, sent, elsewhere } = agentFor(code, { interruptOn: { send_email: true }, clock: "real" });
    const config = { configurable: { thread_id: "diverge" } };
    await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    await new Promise((resolve) => setTimeout(resolve, 5));
    // Resumed where the paused eval is not alive: it replays, and the replay's lookup differs.
    const resumed = await elsewhere().invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }), config);
    expect(evalText(resumed)).toMatch(
      /^ReplayDivergenceError: the resumed eval did not repeat its first run: call #1 was lookup\(\{"name":"t\d+"\}\) but the first run called lookup/,
    );
    expect(lookups).toHaveLength(1);
    expect(sent).toEqual([]);
  });

  it("a journal signed with another key is refused on resume, and nothing runs again", async () => {
    const { lookup, sendEmail, lookups, sent } = mailTools();
    const saver = new MemorySaver();
    // The resuming process's model goes on from where the thread is: it only answers.
    const build = (key: string, first: boolean) => {
      const interpreter = trackedMiddleware({
        ptc: [lookup, sendEmail],
        interruptOn: { send_email: true },
        snapshotSigningKey: key,
      });
      const model = new ScriptedChatModel(
        first ? [callTool("eval", { code: LOOKUP_THEN_SEND }, "eval-1"), reply("done")] : [reply("done")],
      );
      return createAgent({ model, tools: [lookup, sendEmail], middleware: [interpreter], checkpointer: saver });
    };
    const config = { configurable: { thread_id: "foreign" } };
    await build("first-signing-key-0123456789", true).invoke({ messages: [new HumanMessage("go")] }, config);
    const resumed = await build("other-signing-key-0123456789", false).invoke(
      new Command({ resume: { decisions: [{ type: "approve" }] } }),
      config,
    );
    expect(evalText(resumed)).toMatch(
      /^ApprovalError: the review was answered, but the paused eval cannot be resumed \(the stored journal's signature does not match/,
    );
    expect(lookups).toEqual(["ada"]);
    expect(sent).toEqual([]);
  });

  it("task() results are journaled: a subagent that ran before the pause is not run again", async () => {
    const { task, runs } = fakeTaskTool();
    const code = `
const found = await task({ description: "find the address", subagentType: "general" });
await tools.sendEmail({ to: found, body: "hi" })`;
    const { agent, sent } = agentFor(code, { interruptOn: { send_email: true } }, [task]);
    const config = { configurable: { thread_id: "task-journal" } };
    await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    await agent.invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }), config);
    expect(runs).toEqual(["find the address"]);
    expect(sent).toEqual([{ to: "answer to find the address", body: "hi" }]);
  });

  it("task() itself can be reviewed: the request is the task tool's, and a rejected subagent never runs", async () => {
    const { task, runs } = fakeTaskTool();
    const code = `
try { await task({ description: "delete everything", subagentType: "general" }) } catch (e) { e.name + ": " + e.message }`;
    const { agent } = agentFor(code, { interruptOn: { task: { allowedDecisions: ["approve", "reject"] } } }, [task]);
    const config = { configurable: { thread_id: "task-review" } };
    const first = await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    expect(interruptOf(first)?.actionRequests[0]).toMatchObject({
      name: "task",
      args: { description: "delete everything", subagent_type: "general" },
    });
    const resumed = await agent.invoke(
      new Command({ resume: { decisions: [{ type: "reject", message: "no" }] } }),
      config,
    );
    expect(evalText(resumed)).toContain("ToolCallRejectedError: no");
    expect(runs).toEqual([]);
  });

  it("a malformed decision ends the eval with a TypeError saying what is wrong; nothing is sent", async () => {
    const { agent, sent } = agentFor(LOOKUP_THEN_SEND, {
      interruptOn: { send_email: { allowedDecisions: ["approve", "reject"] } },
    });
    const config = { configurable: { thread_id: "malformed" } };
    await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    const edit = { type: "edit", editedAction: { name: "send_email", args: {} } };
    const resumed = await agent.invoke(new Command({ resume: { decisions: [edit] } }), config);
    expect(evalText(resumed)).toContain(
      'TypeError: Decision "edit" is not allowed for send_email; allowed: approve, reject',
    );
    expect(sent).toEqual([]);
  });

  it("without a checkpointer a reviewed call rejects in the guest with ApprovalUnavailableError; nothing is sent", async () => {
    const { lookup, sendEmail, sent } = mailTools();
    const interpreter = trackedMiddleware({
      ptc: [lookup, sendEmail],
      interruptOn: { send_email: true },
    });
    const code = `try { await tools.sendEmail({ to: "a@example.com", body: "x" }) } catch (e) { e.name + ": " + e.message }`;
    const model = new ScriptedChatModel([callTool("eval", { code }, "eval-1"), reply("done")]);
    const agent = createAgent({ model, tools: [lookup, sendEmail], middleware: [interpreter] });
    const result = await agent.invoke(
      { messages: [new HumanMessage("go")] },
      { configurable: { thread_id: "no-saver" } },
    );
    expect(evalText(result)).toContain(
      "ApprovalUnavailableError: This call needs human review, but the eval cannot pause for it: this agent has no checkpointer",
    );
    expect(sent).toEqual([]);
  });

  it("the budgets of a resumed eval count from the resume, not across the human's wait", async () => {
    // A wall budget the resumed eval (restore, replay, the send) meets on a loaded machine too.
    const { agent, sent } = agentFor(LOOKUP_THEN_SEND, {
      interruptOn: { send_email: true },
      executionTimeoutMs: 2000,
      wallTimeoutMs: 5000,
    });
    const config = { configurable: { thread_id: "budget" } };
    await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    // The human takes longer than the whole wall budget.
    await new Promise((resolve) => setTimeout(resolve, 5500));
    const resumed = await agent.invoke(new Command({ resume: { decisions: [{ type: "approve" }] } }), config);
    expect(evalText(resumed)).toContain("sent to ada@example.com");
    expect(sent).toHaveLength(1);
  });

  it("an eval with no reviewed tool in reach runs as before: unlisted calls run and the eval completes", async () => {
    const { agent, lookups } = agentFor(`await tools.lookup({ name: "x" }); Date.now() > 0`, {
      interruptOn: { delete_file: true },
    });
    const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: "none" } });
    expect(evalText(result)).toContain("true");
    expect(lookups).toEqual(["x"]);
  });
});

/** A stand-in for deepagents' task tool with one subagent type, counting its runs. */
function fakeTaskTool() {
  const runs: string[] = [];
  const task = tool(
    async ({ description }: { description: string; subagent_type: string }) => {
      runs.push(description);
      return `answer to ${description}`;
    },
    {
      name: "task",
      description: "Runs a subagent.\n- general: does anything",
      schema: z.object({
        description: z.string(),
        subagent_type: z.string().describe("The subagent to use. Available: general"),
      }),
    },
  );
  return { task, runs };
}
