import { describe, expect, it } from "vitest";
import { createAgent } from "langchain";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import {
  createCodeInterpreterMiddleware,
  type CodeInterpreterMiddleware,
  type CodeInterpreterMiddlewareOptions,
} from "../../src/langchain/index.js";
import {
  ScriptedChatModel,
  ToolRunRecorder,
  callTool,
  contentText,
  fakeWebSearch,
  reply,
  section,
  toolMessages,
} from "./support/agent.js";
import { trackedMiddleware } from "./support/tracked-middleware.js";

const middleware = trackedMiddleware;

/** Runs one agent turn whose model makes the given eval calls in order (one per model call), then replies. */
async function runEvals(
  codes: readonly (string | { code: string; reset?: boolean })[],
  opts: {
    options?: CodeInterpreterMiddlewareOptions;
    interpreter?: CodeInterpreterMiddleware;
    tools?: Parameters<typeof createAgent>[0]["tools"];
    threadId?: string;
    callbacks?: ToolRunRecorder[];
    systemPrompt?: string;
  } = {},
): Promise<{ messages: BaseMessage[]; model: ScriptedChatModel; evals: BaseMessage[] }> {
  const model = new ScriptedChatModel([
    ...codes.map((c) => callTool("eval", typeof c === "string" ? { code: c } : c)),
    reply("done"),
  ]);
  const agent = createAgent({
    model,
    tools: opts.tools ?? [],
    middleware: [opts.interpreter ?? middleware(opts.options)],
    ...(opts.systemPrompt === undefined ? {} : { systemPrompt: opts.systemPrompt }),
  });
  const result = await agent.invoke(
    { messages: [new HumanMessage("go")] },
    { configurable: { thread_id: opts.threadId ?? `t-${Math.random()}` }, callbacks: opts.callbacks ?? [] },
  );
  const messages = result.messages as BaseMessage[];
  return { messages, model, evals: toolMessages(messages) };
}

describe("createAgent with the code interpreter", () => {
  it("bad options throw at construction, naming the option", () => {
    expect(() => createCodeInterpreterMiddleware({ ptc: "all" })).toThrow(/ptcAcknowledgeUnsafe/);
    expect(() => createCodeInterpreterMiddleware({ maxResultChars: -1 })).toThrow(/maxResultChars/);
  });

  it("fans out three PTC searches in one eval; only the final value reaches the messages, and searches are child runs", async () => {
    const { webSearch, calls } = fakeWebSearch("SEARCH-RESULT-BODY");
    const recorder = new ToolRunRecorder();
    const { messages, evals } = await runEvals(
      [
        `const r = await Promise.all(["retrieval","memory","evaluation"].map(t => tools.webSearch({query: t})));\nr.map(x => x.score).reduce((a, b) => a + b, 0)`,
      ],
      { options: { ptc: ["web_search"] }, tools: [webSearch], callbacks: [recorder] },
    );
    expect(evals).toHaveLength(1);
    expect(section(evals[0]!, "result")).toBe(String("retrieval".length + "memory".length + "evaluation".length));
    expect(calls.map((c) => c.query).sort()).toEqual(["evaluation", "memory", "retrieval"]);
    for (const message of messages) expect(contentText(message)).not.toContain("SEARCH-RESULT-BODY");
    // The run's callbacks reached the tool: it ran with our recorder among its handlers...
    for (const call of calls) expect(call.handlers).toContain("tool-run-recorder");
    // ...and each search is a child run of the eval tool run.
    const evalRun = recorder.runs.find((r) => r.name === "eval");
    const searches = recorder.runs.filter((r) => r.name === "web_search");
    expect(evalRun).toBeDefined();
    expect(searches).toHaveLength(3);
    for (const s of searches) expect(s.parentRunId).toBe(evalRun?.runId);
  });

  it("a tool returning { hits: [1, 2] } arrives in the guest as an object, no JSON.parse", async () => {
    const getHits = tool(async () => ({ hits: [1, 2] }), {
      name: "get_hits",
      description: "hits",
      schema: z.object({}),
    });
    const { evals } = await runEvals(
      [`const r = await tools.getHits({}); [typeof r, Array.isArray(r.hits), r.hits.length === 2]`],
      {
        options: { ptc: [getHits] },
      },
    );
    expect(section(evals[0]!, "result")).toBe("[ 'object', true, true ]");
    expect((evals[0] as { status?: string }).status).toBe("success");
  });

  it.each([
    ["1n", "1n"],
    ["new Map([[1, 2]])", "Map(1) { 1 => 2 }"],
    ["undefined", "undefined"],
  ])("renders %s as %s", async (code, expected) => {
    const { evals } = await runEvals([code]);
    expect(section(evals[0]!, "result")).toBe(expected);
  });

  it('shows throw "x" by value, not as an unknown error', async () => {
    const { evals } = await runEvals([`throw "x"`]);
    const error = section(evals[0]!, "error");
    expect((evals[0] as { status?: string }).status).toBe("error");
    expect(error).toContain('"x"');
    expect(error).not.toMatch(/unknown error/i);
  });

  it("a 1 MB string result and a 1 MB error message are cut to maxResultChars with a marker", async () => {
    const { evals } = await runEvals([`"a".repeat(1 << 20)`, `throw new Error("b".repeat(1 << 20))`], {
      options: { maxResultChars: 2000 },
    });
    expect(evals).toHaveLength(2);
    for (const message of evals) {
      const text = contentText(message);
      expect(text.length).toBeLessThanOrEqual(2000);
      expect(text).toMatch(/characters omitted/);
    }
    expect(section(evals[0]!, "result")).toMatch(/^a+\n… \[/);
    expect(section(evals[1]!, "error")).toMatch(/^Error: b+/);
  });

  it("nothing longer than maxResultChars reaches the model, console included", async () => {
    const { model } = await runEvals([`for (let i = 0; i < 2000; i++) console.log("line " + i); "x".repeat(50000)`], {
      options: { maxResultChars: 1000 },
    });
    const seen = model.calls.at(-1)!.messages.filter((m) => m.getType() === "tool");
    expect(seen).toHaveLength(1);
    expect(contentText(seen[0]!).length).toBeLessThanOrEqual(1000);
  });

  it("at the smallest maxResultChars a long console line keeps its head and tail and the status line stays whole", async () => {
    const { evals } = await runEvals([`console.log("abcdefghij".repeat(50)); "done"`], {
      options: { maxResultChars: 300 },
    });
    const text = contentText(evals[0]!);
    expect(text.length).toBeLessThanOrEqual(300);
    expect(section(evals[0]!, "console")).toMatch(/^abcdefghij[a-j]*\n… \[[^\n]*\] …\n[a-j]*abcdefghij$/);
    expect(section(evals[0]!, "result")).toBe("done");
    expect(section(evals[0]!, "status")).toMatch(/^ok; no tool calls; \d+ ms execution, \d+ ms wall$/);
  });

  it("symbols keep their descriptions in results and console lines", async () => {
    const { evals } = await runEvals([`console.log(Symbol("tag")); ({ key: Symbol("my key"), none: Symbol() })`]);
    expect(section(evals[0]!, "console")).toBe("Symbol(tag)");
    expect(section(evals[0]!, "result")).toBe("{ key: Symbol(my key), none: Symbol() }");
  });

  it("a tool field with a default is shown as optional, without integer-bound noise", async () => {
    const repeat = tool(async ({ name, times }: { name: string; times: number }) => name.repeat(times), {
      name: "repeat_name",
      description: "Repeats a name.",
      schema: z.object({ name: z.string(), times: z.number().int().default(1) }),
    });
    const { model, evals } = await runEvals([`await tools.repeatName({ name: "ab" })`], { options: { ptc: [repeat] } });
    const prompt = model.calls[0]!.systemPrompt;
    expect(prompt).toContain("name: string;");
    expect(prompt).toContain("    name: string;\n    /** @default 1 */\n    times?: number;");
    expect(prompt).not.toContain("9007199254740991");
    expect(section(evals[0]!, "result")).toBe("ab");
  });

  it("adds the interpreter prompt after the agent's own system prompt, separated by a blank line", async () => {
    const { model } = await runEvals(["1"], { systemPrompt: "You are terse." });
    const prompt = model.calls[0]!.systemPrompt;
    expect(prompt.startsWith("You are terse.\n\n## Code interpreter")).toBe(true);
    expect(model.calls[0]!.toolNames).toContain("eval");
  });

  it("systemPrompt false adds nothing; a custom string replaces the interpreter section but keeps the tools reference", async () => {
    const { webSearch } = fakeWebSearch("M");
    const off = await runEvals(["1"], { options: { systemPrompt: false }, systemPrompt: "Base." });
    expect(off.model.calls[0]!.systemPrompt).toBe("Base.");
    const custom = await runEvals(["1"], {
      options: { systemPrompt: "Use eval wisely.", ptc: ["web_search"] },
      tools: [webSearch],
    });
    const prompt = custom.model.calls[0]!.systemPrompt;
    expect(prompt.startsWith("Use eval wisely.\n\n")).toBe(true);
    expect(prompt).not.toContain("## Code interpreter");
    expect(prompt).toContain("webSearch");
  });

  it("the prompt's clock claim matches the interpreter's clock", async () => {
    const timing = `const a = Date.now(); let i = 0; while (i < 3e6) i++; Date.now() === a`;
    const frozen = await runEvals([timing]);
    expect(section(frozen.evals[0]!, "result")).toBe("true");
    expect(frozen.model.calls[0]!.systemPrompt).toMatch(/clock is frozen/);
    const fixed = await runEvals([`new Date().toISOString()`], {
      options: { clock: { now: () => Date.UTC(2020, 0, 2) } },
    });
    expect(section(fixed.evals[0]!, "result")).toBe("2020-01-02T00:00:00.000Z");
    expect(fixed.model.calls[0]!.systemPrompt).toMatch(/clock supplied by the application/);
  });

  it("PTC budget errors are catchable in the guest by name", async () => {
    const { webSearch, calls } = fakeWebSearch("M");
    const { evals } = await runEvals(
      [
        `let caught = "none"; try { for (let i = 0; i < 5; i++) await tools.webSearch({ query: "q" + i }) } catch (e) { caught = e.name + "|" + (e instanceof Error) } caught`,
      ],
      { options: { ptc: ["web_search"], maxPtcCalls: 2 }, tools: [webSearch] },
    );
    expect(section(evals[0]!, "result")).toBe("PTCCallBudgetExceededError|true");
    expect(calls).toHaveLength(2);
  });

  it("a per-tool quota refuses that tool's extra calls in the guest, and the prompt states it", async () => {
    const { webSearch, calls } = fakeWebSearch("M");
    const { evals, model } = await runEvals(
      [
        `const out = await Promise.allSettled([1, 2, 3].map((i) => tools.webSearch({ query: "q" + i }))); out.map((o) => o.status === "fulfilled" ? "ok" : o.reason.name).join(",")`,
      ],
      { options: { ptc: ["web_search"], ptcQuotas: { web_search: 2 } }, tools: [webSearch] },
    );
    expect(section(evals[0]!, "result")).toBe("ok,ok,PTCCallBudgetExceededError");
    expect(calls).toHaveLength(2);
    expect(model.calls[0]!.systemPrompt).toContain("`tools.webSearch` 2 calls");
  });

  it("tool errors keep their class name and message in the guest; schema errors arrive as Errors", async () => {
    class RateLimitError extends Error {}
    const flaky = tool(
      async () => {
        throw new RateLimitError("slow down");
      },
      { name: "flaky", description: "fails", schema: z.object({}) },
    );
    const { webSearch } = fakeWebSearch("M");
    const { evals } = await runEvals(
      [
        `try { await tools.flaky({}) } catch (e) { e.name + ": " + e.message }`,
        `try { await tools.webSearch({ query: 5 }) } catch (e) { (e instanceof Error) + " " + e.message.split("\\n")[0] }`,
      ],
      { options: { ptc: [flaky, "web_search"] }, tools: [webSearch] },
    );
    expect(section(evals[0]!, "result")).toBe("RateLimitError: slow down");
    expect(section(evals[1]!, "result")).toBe("true Received tool input did not match expected schema");
  });

  it("a tool is callable by its own name too (`tools.web_search`, as the prompt shows it)", async () => {
    const { webSearch, calls } = fakeWebSearch("M");
    const { evals } = await runEvals([`const r = await tools.web_search({ query: "q" }); typeof r`], {
      options: { ptc: ["web_search"] },
      tools: [webSearch],
    });
    expect(statusOf(evals[0]!)).toBe("success");
    expect(calls).toHaveLength(1);
  });

  it("a call of a missing `tools` member names it, and the hint names the closest tools", async () => {
    const { webSearch } = fakeWebSearch("M");
    const { evals } = await runEvals([`await tools.web_serch({ query: "q" })`], {
      options: { ptc: ["web_search", "read_file"] },
      tools: [webSearch, readFileTool],
    });
    expect(section(evals[0]!, "error")).toMatch(/^TypeError: tools\.web_serch is not a function/);
    expect(section(evals[0]!, "hint")).toBe(
      "`tools.web_serch` is not a tool. The closest tools are `tools.webSearch`, `tools.readFile`.",
    );
  });
});

const readFileTool = tool(async () => "text", {
  name: "read_file",
  description: "reads a file",
  schema: z.object({ path: z.string() }),
});
const statusOf = (message: BaseMessage): string | undefined => (message as { status?: string }).status;

describe("eval tool behaviour through an agent", () => {
  it("TypeScript enum and namespace run", async () => {
    const { evals } = await runEvals([
      "enum Color { Red, Green }; Color.Green",
      "namespace N { export const x = 1 }; N.x",
    ]);
    expect(evals.map((m) => section(m, "result"))).toEqual(["1", "1"]);
  });

  it("a runaway eval is stopped by executionTimeoutMs and the thread's next eval still runs", async () => {
    const { evals } = await runEvals(["var before = 7; while (true) {}", "1 + 1"], {
      options: { executionTimeoutMs: 200 },
    });
    expect(section(evals[0]!, "error")).toMatch(/^TimeoutError/);
    expect(section(evals[1]!, "result")).toBe("2");
  });

  it("console output comes first, warn/error lines marked; captureConsole false hides it but console exists", async () => {
    const shown = await runEvals([`console.log("hi"); console.warn("careful"); 5`]);
    expect(section(shown.evals[0]!, "console")).toMatch(/hi\n.*warn.*careful/);
    expect(section(shown.evals[0]!, "result")).toBe("5");
    const hidden = await runEvals([`console.log("hi"); typeof console.log`], { options: { captureConsole: false } });
    expect(section(hidden.evals[0]!, "console")).toBeUndefined();
    expect(section(hidden.evals[0]!, "result")).toBe("function");
  });

  it("a promise as the last expression is awaited: Promise.resolve(7) shows 7", async () => {
    const { evals } = await runEvals([`Promise.resolve(7)`]);
    expect(section(evals[0]!, "result")).toBe("7");
    expect(section(evals[0]!, "hint")).toBeUndefined();
  });

  it("a rejected floating async IIFE ends with status error and its message", async () => {
    const { evals } = await runEvals([`(async () => { throw new Error("boom") })()`]);
    expect(section(evals[0]!, "error")).toMatch(/^Error: boom/);
    expect(section(evals[0]!, "status")).toMatch(/^error;/);
  });

  it("a floating async IIFE that awaits a PTC call runs past the await, calling the tool once", async () => {
    const marks: number[] = [];
    const mark = tool(
      async ({ n }: { n: number }) => {
        marks.push(n);
        return "marked";
      },
      { name: "mark", description: "marks", schema: z.object({ n: z.number() }) },
    );
    const { evals } = await runEvals(
      [`(async () => { await tools.mark({ n: 1 }); globalThis.done = true })()`, `globalThis.done`],
      { options: { ptc: [mark] } },
    );
    expect(marks).toEqual([1]);
    expect(section(evals[0]!, "status")).toMatch(/^ok; tool calls: mark ×1;/);
    expect(section(evals[1]!, "result")).toBe("true");
  });

  it("a PTC call the program did not await is aborted when the eval ends", async () => {
    let aborted!: () => void;
    const wasAborted = new Promise<void>((resolve) => (aborted = resolve));
    const hang = tool(
      async (_input: Record<string, never>, config) => {
        await new Promise<void>((resolve) => config.signal?.addEventListener("abort", () => resolve(), { once: true }));
        aborted();
        return "late";
      },
      { name: "hang", description: "never finishes", schema: z.object({}) },
    );
    const quick = tool(async () => "ok", { name: "quick", description: "returns", schema: z.object({}) });
    // Awaiting a later call makes sure the host has started the un-awaited one before the eval ends.
    const { evals } = await runEvals([`tools.hang({}); await tools.quick({}); "returned early"`], {
      options: { ptc: [hang, quick] },
    });
    expect(section(evals[0]!, "result")).toBe("returned early");
    await wasAborted;
  });
});

describe("ScriptedChatModel", () => {
  it("gives each instance its own message and tool call ids, so a second run on a shared checkpointer keeps the first run's messages", async () => {
    const { MemorySaver } = await import("@langchain/langgraph");
    const checkpointer = new MemorySaver();
    const threadId = `ids-${Math.random()}`;
    const interpreter = middleware();
    const run = async (code: string) => {
      // A new model per run, as a second process would have: the same script, counting from 1 again.
      const agent = createAgent({
        model: new ScriptedChatModel([callTool("eval", { code }), reply("done")]),
        tools: [],
        middleware: [interpreter],
        checkpointer,
      });
      return (await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: threadId } }))
        .messages as BaseMessage[];
    };
    await run("1");
    const messages = await run("2");
    expect(messages.map((m) => m.getType())).toEqual(["human", "ai", "tool", "ai", "human", "ai", "tool", "ai"]);
    expect(toolMessages(messages).map((m) => section(m, "result"))).toEqual(["1", "2"]);
    expect(new Set(messages.map((m) => m.id)).size).toBe(messages.length);
    const toolCallIds = messages
      .flatMap((m) => (m as { tool_calls?: { id?: string }[] }).tool_calls ?? [])
      .map((c) => c.id);
    expect(new Set(toolCallIds).size).toBe(2);
  });

  it("uses the idPrefix it is given, for reproducible ids", async () => {
    const model = new ScriptedChatModel([callTool("eval", { code: "1" })], { idPrefix: "fixed" });
    const message = await model.invoke([new HumanMessage("go")]);
    expect(message.id).toBe("scripted-fixed-1");
    expect(message.tool_calls?.[0]?.id).toBe("call_fixed_1");
  });
});

describe("approval (documented hazard)", () => {
  it("interruptOn pauses a direct web_search call but not the same tool called from code", async () => {
    const { humanInTheLoopMiddleware } = await import("langchain");
    const { MemorySaver } = await import("@langchain/langgraph");
    const { webSearch, calls } = fakeWebSearch("M");
    const run = async (step: ReturnType<typeof callTool>) => {
      const model = new ScriptedChatModel([step, reply("done")]);
      const agent = createAgent({
        model,
        tools: [webSearch],
        middleware: [
          humanInTheLoopMiddleware({ interruptOn: { web_search: true } }),
          middleware({ ptc: ["web_search"] }),
        ],
        checkpointer: new MemorySaver(),
      });
      return agent.invoke(
        { messages: [new HumanMessage("go")] },
        { configurable: { thread_id: `hitl-${Math.random()}` } },
      );
    };
    const direct = await run(callTool("web_search", { query: "direct" }));
    expect("__interrupt__" in direct && direct.__interrupt__).toBeTruthy();
    expect(calls).toHaveLength(0);
    const fromCode = await run(callTool("eval", { code: `(await tools.webSearch({ query: "code" })).title` }));
    expect("__interrupt__" in fromCode && fromCode.__interrupt__).toBeFalsy();
    expect(calls.map((c) => c.query)).toEqual(["code"]);
  });
});

describe("aborting an agent run", () => {
  it("stops the running eval and aborts its in-flight PTC call", async () => {
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    let toolSawAbort = false;
    const hang = tool(
      async (_input: Record<string, never>, config) => {
        started();
        await new Promise<void>((resolve) => config.signal?.addEventListener("abort", () => resolve(), { once: true }));
        toolSawAbort = true;
        return "late";
      },
      { name: "hang", description: "never finishes", schema: z.object({}) },
    );
    const model = new ScriptedChatModel([callTool("eval", { code: "await tools.hang({})" }), reply("done")]);
    const agent = createAgent({ model, tools: [], middleware: [middleware({ ptc: [hang] })] });
    const controller = new AbortController();
    const run = agent.invoke(
      { messages: [new HumanMessage("go")] },
      { configurable: { thread_id: "abort" }, signal: controller.signal },
    );
    await running;
    controller.abort();
    await expect(run).rejects.toThrow(/abort/i);
    await new Promise((r) => setTimeout(r, 50));
    expect(toolSawAbort).toBe(true);
  });
});

describe("interpreter sessions in an agent", () => {
  it("thread mode: declarations persist across evals and agent runs of one thread, not into another thread", async () => {
    const interpreter = middleware();
    await runEvals(["const x = 41"], { interpreter, threadId: "A" });
    const again = await runEvals(["x + 1"], { interpreter, threadId: "A" });
    expect(section(again.evals[0]!, "result")).toBe("42");
    const other = await runEvals(["typeof x"], { interpreter, threadId: "B" });
    expect(section(other.evals[0]!, "result")).toBe("undefined");
  });

  it("two middleware instances never share a session, even without a thread id", async () => {
    const a = middleware();
    const b = middleware();
    await runEvals(["var shared = 1"], { interpreter: a, threadId: "same" });
    const seen = await runEvals(["typeof shared"], { interpreter: b, threadId: "same" });
    expect(section(seen.evals[0]!, "result")).toBe("undefined");
  });

  it("beyond maxLiveSessions the least recently used thread's interpreter is closed", async () => {
    const interpreter = middleware({ maxLiveSessions: 1 });
    await runEvals(["var kept = 1"], { interpreter, threadId: "L1" });
    await runEvals(["var other = 2"], { interpreter, threadId: "L2" });
    const back = await runEvals(["typeof kept"], { interpreter, threadId: "L1" });
    expect(section(back.evals[0]!, "result")).toBe("undefined");
  });

  it("reset: true drops the session's state before running", async () => {
    const { evals } = await runEvals(["const y = 1", { code: "typeof y", reset: true }]);
    expect(section(evals[1]!, "result")).toBe("undefined");
  });

  it("turn mode: state persists within a run and is gone in the next run", async () => {
    const interpreter = middleware({ mode: "turn" });
    const first = await runEvals(["const z = 5", "z * 2"], { interpreter, threadId: "T" });
    expect(section(first.evals[1]!, "result")).toBe("10");
    const next = await runEvals(["typeof z"], { interpreter, threadId: "T" });
    expect(section(next.evals[0]!, "result")).toBe("undefined");
  });

  it("call mode: every eval starts fresh", async () => {
    const { evals } = await runEvals(["const w = 5", "typeof w"], { options: { mode: "call" } });
    expect(section(evals[1]!, "result")).toBe("undefined");
  });

  it("parallel eval calls of one thread run one after another", async () => {
    const sleep = tool(async ({ ms }: { ms: number }) => new Promise((r) => setTimeout(() => r(ms), ms)), {
      name: "sleep",
      description: "waits",
      schema: z.object({ ms: z.number() }),
    });
    const model = new ScriptedChatModel([
      new (await import("@langchain/core/messages")).AIMessage({
        content: "",
        tool_calls: [
          {
            name: "eval",
            args: { code: "var order = []; order.push(1); await tools.sleep({ ms: 50 }); order.push(2); 'first'" },
            id: "c1",
            type: "tool_call",
          },
          { name: "eval", args: { code: "order.push(3); order.join(',')" }, id: "c2", type: "tool_call" },
        ],
      }),
      reply("done"),
    ]);
    const agent = createAgent({ model, tools: [], middleware: [middleware({ ptc: [sleep] })] });
    const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: "P" } });
    const evals = toolMessages(result.messages as BaseMessage[]);
    const second = evals.find((m) => (m as { tool_call_id?: string }).tool_call_id === "c2");
    expect(section(second!, "result")).toBe("1,2,3");
  });
});
