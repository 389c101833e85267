import { trace } from "@opentelemetry/api";
import { HumanMessage, type BaseMessage, type ToolMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { createAgent } from "langchain";
import { afterEach, describe, expect, it } from "vitest";
import { z } from "zod";
import type { UsageRecord } from "../../src/index.js";
import type { CodeInterpreterMiddlewareOptions } from "../../src/langchain/index.js";
import { parentOf, registerOtel, type OtelHarness } from "../telemetry/support.js";
import { ScriptedChatModel, callTool, reply, toolMessages } from "./support/agent.js";
import { trackedMiddleware } from "./support/tracked-middleware.js";

let otel: OtelHarness | undefined;
afterEach(async () => {
  await otel?.close();
  otel = undefined;
});

/** `lookup`: a tool that records a span of its own. */
const lookup = tool(
  async ({ id }: { id: number }) =>
    trace.getTracer("tool-test").startActiveSpan("lookup-db", (span) => {
      span.setAttribute("row.id", id);
      span.end();
      return { id, name: `row ${id}` };
    }),
  { name: "lookup", description: "Looks a row up.", schema: z.object({ id: z.number() }) },
);

async function runAgent(
  codes: readonly string[],
  options: CodeInterpreterMiddlewareOptions,
  threadId = `tel-${Math.random()}`,
): Promise<BaseMessage[]> {
  const model = new ScriptedChatModel([...codes.map((code) => callTool("eval", { code })), reply("done")]);
  const agent = createAgent({
    model,
    tools: [lookup],
    middleware: [trackedMiddleware({ ptc: ["lookup"], ...options })] as never[],
  });
  const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: threadId } });
  return toolMessages(result.messages as BaseMessage[]);
}

const nextTurn = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));

describe("telemetry of an agent run", () => {
  it("an eval calling two tools: the eval tool's span, the eval's, two GenAI tool spans under it, and the tools' own spans under those", async () => {
    otel = registerOtel();
    const [message] = await runAgent(
      ["const a = await tools.lookup({ id: 1 }); const b = await tools.lookup({ id: 2 }); a.name + b.name"],
      {},
    );
    const toolCallId = (message as ToolMessage).tool_call_id;
    const spans = otel.spans();
    const evalTool = spans.find((s) => s.name === "execute_tool eval")!;
    expect(evalTool.attributes).toMatchObject({
      "gen_ai.operation.name": "execute_tool",
      "gen_ai.tool.name": "eval",
      "gen_ai.tool.call.id": toolCallId,
    });
    expect(evalTool.attributes["quickjs_native.session.hash"]).toMatch(/^[0-9a-f]{16}$/);
    const evalSpan = spans.find((s) => s.name === "quickjs_native.eval")!;
    expect(parentOf(evalSpan)).toBe(evalTool.spanContext().spanId);
    expect(evalSpan.attributes).toMatchObject({
      "quickjs_native.outcome": "OK",
      "quickjs_native.host_calls": 2,
      "quickjs_native.tier": "in-process",
    });
    const toolSpans = spans.filter((s) => s.name === "execute_tool lookup");
    expect(toolSpans).toHaveLength(2);
    expect(toolSpans.map((s) => s.attributes["gen_ai.tool.call.id"]).sort()).toEqual([
      `${toolCallId}:ptc:1`,
      `${toolCallId}:ptc:2`,
    ]);
    for (const s of toolSpans) {
      expect(s.attributes).toMatchObject({ "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "lookup" });
      expect(parentOf(s)).toBe(evalSpan.spanContext().spanId);
    }
    const own = spans.filter((s) => s.name === "lookup-db");
    expect(own).toHaveLength(2);
    const byRow = new Map(own.map((s) => [s.attributes["row.id"], parentOf(s)]));
    const byCall = new Map(toolSpans.map((s) => [s.attributes["gen_ai.tool.call.id"], s.spanContext().spanId]));
    expect(byRow.get(1)).toBe(byCall.get(`${toolCallId}:ptc:1`));
    expect(byRow.get(2)).toBe(byCall.get(`${toolCallId}:ptc:2`));
  });

  it("the outcome counter of a run with one TIMEOUT and one success", async () => {
    otel = registerOtel();
    await runAgent(["while (true) {}", "1 + 1"], { executionTimeoutMs: 100, mode: "turn" });
    const counts = await otel.metric("quickjs_native.evals");
    const by = Object.fromEntries(counts.map(([a, v]) => [a["quickjs_native.outcome"], v]));
    expect(by).toMatchObject({ TIMEOUT: 1, OK: 1 });
  });

  it("onUsage gets one record per eval, billed to the thread id or to usageTenant, with PTC calls by tool name", async () => {
    const records: UsageRecord[] = [];
    const messages = await runAgent(
      ["(await tools.lookup({ id: 3 })).name", "2 + 2"],
      { onUsage: (r) => records.push(r) },
      "thread-a",
    );
    await nextTurn();
    expect(records).toHaveLength(2);
    expect(records.map((r) => r.tenant)).toEqual(["thread-a", "thread-a"]);
    expect(records[0]!.hostCallsByName).toEqual({ lookup: 1 });
    const artifacts = messages.map(
      (m) => (m as unknown as { artifact: { toolCalls: Record<string, number> } }).artifact,
    );
    expect(records[0]!.hostCallsByName).toEqual(artifacts[0]!.toolCalls);
    const billed: UsageRecord[] = [];
    await runAgent(["1"], {
      onUsage: (r) => billed.push(r),
      usageTenant: (config) => `org:${String(config.configurable?.org)}`,
    });
    await nextTurn();
    expect(billed.map((r) => r.tenant)).toEqual(["org:undefined"]);
  });
});
