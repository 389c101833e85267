import { describe, expect, it } from "vitest";
import { createAgent, createMiddleware } from "langchain";
import { createDeepAgent } from "deepagents";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import type { CodeInterpreterMiddlewareOptions } from "../../src/langchain/index.js";
import type { EvalOutcomeMetadata } from "../../src/langchain/outcome.js";
import { ScriptedChatModel, callTool, contentText, reply, section, toolMessages } from "./support/agent.js";
import { FakeSubagentModel } from "./support/fake-subagent.js";
import { trackedMiddleware } from "./support/tracked-middleware.js";

const interpreter = trackedMiddleware;

/** `get_hits`: structured search hits, and how often it ran. */
function fakeGetHits(delayMs = 0) {
  const state = { calls: 0 };
  const getHits = tool(
    async ({ query }: { query?: string }, config) => {
      state.calls++;
      if (delayMs > 0) {
        await new Promise<void>((resolve) => {
          const timer = setTimeout(resolve, delayMs);
          config.signal?.addEventListener(
            "abort",
            () => {
              clearTimeout(timer);
              resolve();
            },
            { once: true },
          );
        });
      }
      return {
        hits: [
          { id: 1, title: `hit for ${query ?? "all"}` },
          { id: 2, title: "another" },
        ],
      };
    },
    {
      name: "get_hits",
      description: "Returns search hits.",
      schema: z.object({ query: z.string().optional().describe("Filter") }),
    },
  );
  return { getHits, state };
}

type Step = string | ((messages: readonly BaseMessage[]) => ReturnType<typeof callTool>);

async function runAgent(
  steps: readonly Step[],
  options: CodeInterpreterMiddlewareOptions,
  tools: unknown[] = [],
  extraMiddleware: unknown[] = [],
) {
  const model = new ScriptedChatModel([
    ...steps.map((s) => (typeof s === "string" ? callTool("eval", { code: s }) : s)),
    reply("done"),
  ]);
  const agent = createAgent({
    model,
    tools: tools as never[],
    middleware: [...(extraMiddleware as never[]), interpreter(options)] as never[],
  });
  const result = await agent.invoke(
    { messages: [new HumanMessage("go")] },
    { configurable: { thread_id: `o-${Math.random()}` } },
  );
  const messages = result.messages as BaseMessage[];
  return { messages, evals: toolMessages(messages), model };
}

function artifactOf(message: BaseMessage): EvalOutcomeMetadata {
  return (message as unknown as { artifact: EvalOutcomeMetadata }).artifact;
}

const PATH = /\/eval_outputs\/[\w-]+\/(?:console|result|error)\.txt/;

describe("outcome metadata on every eval ToolMessage", () => {
  it("an eval with two tool calls says ok, counts them per tool, and carries the same as the artifact", async () => {
    const { getHits, state } = fakeGetHits();
    const { evals } = await runAgent(
      [
        `const a = await tools.getHits({ query: "x" }); const b = await tools.getHits({}); a.hits.length + b.hits.length`,
      ],
      { ptc: ["get_hits"] },
      [getHits],
    );
    expect(state.calls).toBe(2);
    expect(section(evals[0]!, "result")).toBe("4");
    const status = section(evals[0]!, "status")!;
    expect(status).toMatch(/^ok; tool calls: get_hits ×2; \d+ ms execution, \d+ ms wall$/);
    const artifact = artifactOf(evals[0]!);
    expect(artifact).toMatchObject({ status: "ok", toolCalls: { get_hits: 2 }, subagentCalls: 0, kept: [] });
    expect(artifact.wallMs).toBeGreaterThanOrEqual(artifact.executionMs);
  });

  it("a runaway loop ends with status timeout, a throw with status error", async () => {
    const { evals } = await runAgent([`while (true) {}`, `throw new TypeError("nope")`], { executionTimeoutMs: 150 });
    expect(artifactOf(evals[0]!).status).toBe("timeout");
    expect(section(evals[0]!, "status")).toMatch(/^timeout; no tool calls;/);
    expect(artifactOf(evals[1]!).status).toBe("error");
    expect((evals[1] as unknown as { status: string }).status).toBe("error");
  });
});

describe("subagent calls in the outcome", () => {
  it("three task() calls count as three subagent calls, in the status line and the artifact", async () => {
    const model = new ScriptedChatModel([
      callTool("eval", {
        code: `(await Promise.all([1, 2, 3].map((n) => task({ description: "echo " + n, subagentType: "echo" })))).length`,
      }),
      reply("done"),
    ]);
    const echo = new FakeSubagentModel({ answer: (t) => t });
    const agent = createDeepAgent({
      model,
      middleware: [interpreter()],
      subagents: [{ name: "echo", description: "Echoes.", systemPrompt: "Echo.", model: echo, tools: [] }],
    });
    const result = await agent.invoke(
      { messages: [new HumanMessage("go")] },
      { configurable: { thread_id: `sa-${Math.random()}` } },
    );
    const [evalMessage] = toolMessages(result.messages as BaseMessage[]);
    expect(section(evalMessage!, "result")).toBe("3");
    expect(artifactOf(evalMessage!).subagentCalls).toBe(3);
    expect(section(evalMessage!, "status")).toMatch(/^ok; no tool calls; subagents: 3;/);
  });
});

describe("nothing is lost to truncation", () => {
  const PRINT_100KB = `for (let i = 0; i < 1000; i++) console.log(String(i).padStart(4, "0") + ":" + "x".repeat(95)); "printed"`;
  const expected = Array.from({ length: 1000 }, (_, i) => `${String(i).padStart(4, "0")}:${"x".repeat(95)}`).join("\n");

  it("without agent files, 100 KB of console fits maxResultChars, names a path, and readOutput(path) returns the full text", async () => {
    const { evals } = await runAgent(
      [
        PRINT_100KB,
        (messages) => {
          const path = PATH.exec(contentText(toolMessages(messages)[0]!))![0];
          return callTool("eval", {
            code: `const full = readOutput(${JSON.stringify(path)}); [full.length, full === ${JSON.stringify(expected)}]`,
          });
        },
      ],
      { maxResultChars: 3000 },
    );
    const first = contentText(evals[0]!);
    expect(first.length).toBeLessThanOrEqual(3000);
    expect(first).toMatch(
      /characters omitted; full text \(100,999 characters\) kept as "\/eval_outputs\/[\w-]+\/console\.txt"/,
    );
    expect(artifactOf(evals[0]!).kept).toEqual([
      expect.objectContaining({ section: "console", store: "store", chars: 100_999, complete: true }),
    ]);
    expect(section(evals[1]!, "result")).toBe("[ 100999, true ]");
  });

  it("maxKeptOutputChars: 0 keeps nothing, and neither the marker nor the prompt promises a path", async () => {
    const { evals, model } = await runAgent([PRINT_100KB], { maxResultChars: 3000, maxKeptOutputChars: 0 });
    expect(contentText(evals[0]!)).toMatch(/characters omitted\] …/);
    expect(contentText(evals[0]!)).not.toMatch(PATH);
    expect(artifactOf(evals[0]!).kept).toEqual([]);
    expect(model.calls[0]!.systemPrompt).toContain("keeps its head and tail, so return summaries");
    expect(model.calls[0]!.systemPrompt).not.toContain("saved at a path");
  });

  it("a deep agent gets the full text in its files: read_file on the named path returns every line", async () => {
    const model = new ScriptedChatModel([
      callTool("eval", { code: PRINT_100KB }),
      (messages) =>
        callTool("read_file", {
          file_path: PATH.exec(contentText(toolMessages(messages)[0]!))![0],
          offset: 0,
          limit: 500,
        }),
      (messages) =>
        callTool("read_file", {
          file_path: PATH.exec(contentText(toolMessages(messages)[0]!))![0],
          offset: 500,
          limit: 500,
        }),
      reply("done"),
    ]);
    const agent = createDeepAgent({ model, middleware: [interpreter({ maxResultChars: 3000 })] });
    const result = await agent.invoke(
      { messages: [new HumanMessage("go")] },
      { configurable: { thread_id: `d-${Math.random()}` } },
    );
    const [evalMessage, page1, page2] = toolMessages(result.messages as BaseMessage[]);
    expect(contentText(evalMessage!).length).toBeLessThanOrEqual(3000);
    expect(contentText(evalMessage!)).toMatch(
      /saved to \/eval_outputs\/[\w-]+\/console\.txt; page through it with read_file/,
    );
    // Each page is text blocks starting with a "@@ lines a-b of n ... @@" header line.
    const pageText = (page: BaseMessage): string => {
      const blocks = page.content as { type: string; text: string }[];
      return blocks
        .map((b) => b.text)
        .join("")
        .replace(/^@@ [^\n]* @@\n/, "");
    };
    expect(`${pageText(page1!)}\n${pageText(page2!)}`).toBe(expected);
  });
});

describe("live progress on the custom stream", () => {
  it("yields eval start, tool start/end, console and outcome events of a running eval before its ToolMessage", async () => {
    let release!: () => void;
    const gate = new Promise<void>((resolve) => (release = resolve));
    const slow = tool(
      async () => {
        await gate;
        return "slow done";
      },
      { name: "slow_tool", description: "Waits.", schema: z.object({}) },
    );
    const model = new ScriptedChatModel([
      callTool("eval", {
        code: `console.log("before"); const r = await tools.slowTool({}); console.log("after", r); r`,
      }),
      reply("done"),
    ]);
    const agent = createAgent({ model, tools: [slow], middleware: [interpreter({ ptc: ["slow_tool"] })] });
    const seen: string[] = [];
    const stream = await agent.stream(
      { messages: [new HumanMessage("go")] },
      { streamMode: ["custom", "updates"], configurable: { thread_id: `s-${Math.random()}` } },
    );
    for await (const [mode, chunk] of stream as AsyncIterable<[string, Record<string, unknown>]>) {
      if (mode === "custom") {
        const detail = chunk.tool ?? chunk.text ?? (chunk.outcome as { status?: string } | undefined)?.status ?? "";
        seen.push(`${String(chunk.event)}:${String(detail)}`);
        // The tool is still running when its start event arrives: release it only now.
        if (chunk.event === "tool_start") release();
      } else if (mode === "updates" && "tools" in chunk && JSON.stringify(chunk).includes("slow done")) {
        // Only the tools node's update: a hook that writes state (the snapshot, after the run) re-emits the messages.
        seen.push("toolmessage");
      }
    }
    // Console lines are live too: each arrives in the order the guest wrote it, between the tool events.
    expect(seen).toEqual([
      "eval_start:",
      "console:before",
      "tool_start:slow_tool",
      "tool_end:slow_tool",
      "console:after slow done",
      "eval_end:ok",
      "toolmessage",
    ]);
  });
});

describe("hints for known mistakes", () => {
  async function evalWithHits(code: string, options: CodeInterpreterMiddlewareOptions = {}, delayMs = 0) {
    const { getHits } = fakeGetHits(delayMs);
    const { evals } = await runAgent([code], { ptc: ["get_hits"], ...options }, [getHits]);
    return { hint: section(evals[0]!, "hint"), message: evals[0]! };
  }

  it("JSON.parse on a tool result says the result is already an object", async () => {
    const { hint, message } = await evalWithHits(`JSON.parse(await tools.getHits({}))`);
    expect(section(message, "error")).toMatch(/^SyntaxError/);
    expect(hint).toMatch(/already an object.*without `JSON\.parse`/);
    expect(artifactOf(message).hint).toBe(hint);
  });

  it("a genuine JSON syntax error gets no hint", async () => {
    const { hint } = await evalWithHits(`JSON.parse("{bad")`);
    expect(hint).toBeUndefined();
  });

  it("an un-awaited tool promise as the final value is awaited: its value is the result, no hint", async () => {
    const { hint, message } = await evalWithHits(`tools.getHits({})`);
    expect(section(message, "result")).toMatch(/hits: \[.*id: 1, title: 'hit for all'.*id: 2/s);
    expect(hint).toBeUndefined();
  });

  it("a final promise that can never settle is shown as a promise, with a hint saying so", async () => {
    const { hint, message } = await evalWithHits(`new Promise(() => {})`);
    expect(section(message, "result")).toBe("Promise {}");
    expect(hint).toMatch(/promise that can never settle/);
  });

  it("tools.x called with a string says to pass one object with its fields", async () => {
    const { hint } = await evalWithHits(`await tools.getHits("cats")`);
    expect(hint).toBe(
      "Call `tools.getHits` with one object holding its input fields: `tools.getHits({ query: ... })`.",
    );
  });

  it("a ReferenceError for a tool's snake_case name points to tools.<camelName>", async () => {
    const { hint } = await evalWithHits(`await get_hits({})`);
    expect(hint).toBe("`get_hits` does not exist, but `tools.getHits` does: did you mean `tools.getHits`?");
  });

  it("a ReferenceError for a global in the wrong case names the global", async () => {
    const { hint } = await evalWithHits(`const myTotal = 1; Json.stringify({ a: myTotal })`);
    expect(hint).toBe("`Json` does not exist, but `JSON` does: did you mean `JSON`?");
  });

  it("a ReferenceError for a name with no near match gets no hint", async () => {
    const { hint } = await evalWithHits(`undefinedThingXyz + 1`);
    expect(hint).toBeUndefined();
  });

  it("a wall-clock timeout while only a tool was running says the program was waiting, not computing", async () => {
    // The wall budget must find the guest inside the tool call: with 300 ms, a loaded machine could
    // still be compiling or starting the guest when it ran out. The tool answers only after a minute.
    const { hint, message } = await evalWithHits(
      `await tools.getHits({})`,
      { executionTimeoutMs: 100, wallTimeoutMs: 3000 },
      60_000,
    );
    expect(artifactOf(message).status).toBe("timeout");
    expect(hint).toMatch(
      /^The 3 s time limit ran out while the program was waiting for `tools\.getHits`, not computing\./,
    );
  });

  it("a CPU timeout gets no tool hint", async () => {
    const { hint } = await evalWithHits(`while (true) {}`, { executionTimeoutMs: 100 });
    expect(hint).toBeUndefined();
  });
});

describe("per-turn tools", () => {
  it("a thread's first eval sees its own tools even when another thread was offered fewer in between", async () => {
    const { getHits } = fakeGetHits();
    let aModelCalled!: () => void;
    const aCalled = new Promise<void>((resolve) => (aModelCalled = resolve));
    let bModelCalled!: () => void;
    const bCalled = new Promise<void>((resolve) => (bModelCalled = resolve));
    let firstA = true;
    const dropForB = createMiddleware({
      name: "DropGetHitsForThreadB",
      wrapModelCall: async (request, handler) => {
        if (request.runtime.configurable?.thread_id === "b") {
          const response = await handler({
            ...request,
            tools: request.tools.filter((t) => (t as { name?: string }).name !== "get_hits"),
          });
          bModelCalled();
          return response;
        }
        const response = await handler(request);
        if (firstA) {
          firstA = false;
          aModelCalled();
          // Thread b's model call happens between a's model call and a's eval.
          await bCalled;
        }
        return response;
      },
    });
    const model = new ScriptedChatModel([
      callTool("eval", { code: "typeof tools.getHits" }),
      reply("b done"),
      reply("a done"),
    ]);
    const agent = createAgent({ model, tools: [getHits], middleware: [dropForB, interpreter({ ptc: ["get_hits"] })] });
    const a = agent.invoke({ messages: [new HumanMessage("a")] }, { configurable: { thread_id: "a" } });
    await aCalled;
    await agent.invoke({ messages: [new HumanMessage("b")] }, { configurable: { thread_id: "b" } });
    const [evalMessage] = toolMessages((await a).messages as BaseMessage[]);
    expect(section(evalMessage!, "result")).toBe("function");
  });

  it("a middleware that drops a tool on the second model call removes tools.<name> and its prompt reference", async () => {
    const { getHits } = fakeGetHits();
    let modelCalls = 0;
    const dropOnSecond = createMiddleware({
      name: "DropGetHitsOnSecondCall",
      wrapModelCall: (request, handler) => {
        modelCalls++;
        return handler(
          modelCalls >= 2
            ? { ...request, tools: request.tools.filter((t) => (t as { name?: string }).name !== "get_hits") }
            : request,
        );
      },
    });
    const { evals, model } = await runAgent(
      [`typeof tools.getHits`, `typeof tools.getHits`],
      { ptc: ["get_hits"] },
      [getHits],
      [dropOnSecond],
    );
    expect(section(evals[0]!, "result")).toBe("function");
    expect(section(evals[1]!, "result")).toBe("undefined");
    expect(model.calls[0]!.systemPrompt).toContain("getHits(");
    expect(model.calls[1]!.systemPrompt).not.toContain("getHits(");
  });
});
