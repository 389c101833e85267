/**
 * Replay fidelity of a paused eval (issue 27, items 1 and 7): every call that finished before the
 * pause is answered from the journal on resume, whatever its position; journaled answers settle in
 * the order they settled in the run that was journaled; arguments the journal cannot copy exactly
 * (a null prototype) are not a divergence.
 */
import { describe, expect, it } from "vitest";
import { createAgent } from "langchain";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { Command, InMemoryStore, MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import type { CodeInterpreterMiddlewareOptions } from "../../src/langchain/index.js";
import { ScriptedChatModel, callTool, contentText, reply, toolMessages } from "./support/agent.js";
import { trackedMiddleware } from "./support/tracked-middleware.js";

const sleep = (ms: number) => new Promise((resolve) => setTimeout(resolve, ms));

/** send_email (reviewed in these tests), charge_card, lookup, slow and fast: each logs its runs. */
function ledgerTools() {
  const runs: string[] = [];
  const ledger: number[] = [];
  const sent: string[] = [];
  const sendEmail = tool(
    async ({ to, body }: { to: string; body?: string }) => {
      sent.push(`${to}:${body ?? ""}`);
      return `sent to ${to}`;
    },
    {
      name: "send_email",
      description: "Sends an email.",
      schema: z.object({ to: z.string(), body: z.string().optional() }),
    },
  );
  const chargeCard = tool(
    async ({ amount }: { amount: number }) => {
      ledger.push(amount);
      return `charged ${amount}`;
    },
    {
      name: "charge_card",
      description: "Charges the card.",
      schema: z.object({ amount: z.number() }),
    },
  );
  const lookup = tool(
    async ({ name }: { name: string }) => {
      runs.push(`lookup ${name}`);
      return { email: `${name}@example.com` };
    },
    {
      name: "lookup",
      description: "Finds a person's email address.",
      schema: z.object({ name: z.string() }),
    },
  );
  const slow = tool(
    async () => {
      await sleep(80);
      runs.push("slow");
      return "slow";
    },
    { name: "slow", description: "Slow.", schema: z.object({}) },
  );
  const fast = tool(
    async () => {
      runs.push("fast");
      return "fast";
    },
    { name: "fast", description: "Fast.", schema: z.object({}) },
  );
  return { tools: [sendEmail, chargeCard, lookup, slow, fast], runs, ledger, sent };
}

function agentFor(code: string, options: CodeInterpreterMiddlewareOptions, store?: InMemoryStore) {
  const t = ledgerTools();
  const interpreter = trackedMiddleware({
    ptc: ["send_email", "charge_card", "lookup", "slow", "fast"],
    ...options,
  });
  const model = new ScriptedChatModel([callTool("eval", { code }, "eval-1"), reply("done")]);
  const checkpointer = new MemorySaver();
  const agent = createAgent({
    model,
    tools: t.tools,
    middleware: [interpreter],
    checkpointer,
    ...(store === undefined ? {} : { store }),
  });
  return { agent, checkpointer, ...t };
}

function interrupted(result: Record<string, unknown>): boolean {
  return (result["__interrupt__"] as unknown[] | undefined)?.length === 1;
}

function evalText(result: Record<string, unknown>): string {
  return contentText(toolMessages(result["messages"] as BaseMessage[]).at(-1)!);
}

const approve = new Command({ resume: { decisions: [{ type: "approve" }] } });

describe("a resumed eval answers every call that finished before the pause from the journal", () => {
  const slowDescription = async () => {
    await sleep(30);
    return "an email";
  };
  it.each([
    ["with an async review description", { allowedDecisions: ["approve" as const], description: slowDescription }],
    ["with the default description", true as const],
  ])("a call after the paused one that finished while it waited is not run again (%s)", async (_title, review) => {
    const code = `(await Promise.all([tools.sendEmail({ to: "a@example.com" }), tools.chargeCard({ amount: 5 })])).join(" | ")`;
    const { agent, ledger, sent } = agentFor(code, { interruptOn: { send_email: review } });
    const config = { configurable: { thread_id: "later-position" } };
    const first = await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    expect(interrupted(first)).toBe(true);
    // Whether charge_card started before the pause or was held there, it runs once in all.
    expect(ledger.length).toBeLessThanOrEqual(1);
    const resumed = await agent.invoke(approve, config);
    expect(interrupted(resumed)).toBe(false);
    expect(ledger).toEqual([5]);
    expect(sent).toEqual(["a@example.com:"]);
    expect(evalText(resumed)).toContain("sent to a@example.com | charged 5");
  });
});

describe("replay fidelity", () => {
  it("an argument object with a null prototype is the same call on resume, not a ReplayDivergenceError", async () => {
    const code = `
const q = Object.create(null);
q.name = "ada";
const who = await tools.lookup(q);
await tools.sendEmail({ to: who.email, body: "hello" })`;
    const { agent, runs, sent } = agentFor(code, { interruptOn: { send_email: true } });
    const config = { configurable: { thread_id: "null-proto" } };
    expect(interrupted(await agent.invoke({ messages: [new HumanMessage("go")] }, config))).toBe(true);
    const resumed = await agent.invoke(approve, config);
    expect(evalText(resumed)).not.toContain("ReplayDivergenceError");
    expect(evalText(resumed)).toContain("sent to ada@example.com");
    expect(sent).toEqual(["ada@example.com:hello"]);
    expect(runs).toEqual(["lookup ada"]);
  });

  it("Promise.race over journaled calls settles on resume as it did in the run that paused", async () => {
    const code = `
const first = await Promise.race([tools.slow({}), tools.fast({})]);
await tools.sendEmail({ to: "a@example.com", body: first });
first`;
    const { agent, runs, sent } = agentFor(code, { interruptOn: { send_email: true } });
    const config = { configurable: { thread_id: "race" } };
    const paused = await agent.invoke({ messages: [new HumanMessage("go")] }, config);
    expect(
      (paused["__interrupt__"] as { value: { actionRequests: { args: unknown }[] } }[])[0]?.value.actionRequests[0]
        ?.args,
    ).toEqual({ to: "a@example.com", body: "fast" });
    const resumed = await agent.invoke(approve, config);
    expect(evalText(resumed)).not.toContain("ReplayDivergenceError");
    expect(evalText(resumed)).toContain("<result>\nfast\n</result>");
    expect(sent).toEqual(["a@example.com:fast"]);
    expect(runs.sort()).toEqual(["fast", "slow"]);
  });
});

describe("with a store, the journal is kept in the store", () => {
  it("the checkpointer holds one short piece, and the resume answers every finished call from the store's copy", async () => {
    const code = `(await Promise.all([tools.sendEmail({ to: "a@example.com" }), tools.chargeCard({ amount: 5 })])).join(" | ")`;
    const { agent, checkpointer, ledger, sent } = agentFor(
      code,
      { interruptOn: { send_email: true } },
      new InMemoryStore(),
    );
    const config = { configurable: { thread_id: "journal-in-store" } };
    expect(interrupted(await agent.invoke({ messages: [new HumanMessage("go")] }, config))).toBe(true);
    const rows = Object.values(
      (checkpointer as unknown as { writes: Record<string, Record<string, [string, string, unknown]>> }).writes,
    ).flatMap((w) => Object.values(w));
    const journal = rows.filter(([task]) => task.startsWith("code-interpreter-replay:"));
    expect(journal).toHaveLength(1);
    expect(String(new TextDecoder().decode(journal[0]![2] as Uint8Array))).toMatch(/store:[0-9a-f]{32}/);
    const resumed = await agent.invoke(approve, config);
    expect(evalText(resumed)).toContain("sent to a@example.com | charged 5");
    expect(ledger).toEqual([5]);
    expect(sent).toEqual(["a@example.com:"]);
  });
});
