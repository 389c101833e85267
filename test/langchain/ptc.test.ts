import { describe, expect, it } from "vitest";
import { tool } from "@langchain/core/tools";
import { ToolMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph";
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import { CallbackManager } from "@langchain/core/callbacks/manager";
import { z } from "zod";
import { resolveOptions } from "../../src/langchain/options.js";
import { camelCaseToolName } from "../../src/langchain/signatures.js";
import {
  PtcEvalContext,
  PtcResolver,
  PTCCallBudgetExceededError,
  toGuestValue,
  type EvalRunConfig,
  type PtcTool,
} from "../../src/langchain/ptc.js";

function fileTool(name: string) {
  return tool(async () => `${name} output`, {
    name,
    description: name,
    schema: z.object({ path: z.string().optional() }),
  });
}

const readFile = fileTool("read_file");
const ls = fileTool("ls");
const writeFile = fileTool("write_file");
const webSearch = tool(async ({ query }: { query: string }) => ({ hits: [query] }), {
  name: "web_search",
  description: "search the web",
  schema: z.object({ query: z.string() }),
});
const evalTool = fileTool("eval");
const task = fileTool("task");

function resolver(ptc: Parameters<typeof resolveOptions>[0]) {
  const o = resolveOptions(ptc);
  return new PtcResolver(o.ptc, o.toolName);
}

function names(view: { byCamelName: ReadonlyMap<string, PtcTool> }): string[] {
  return [...view.byCamelName.values()].map((t) => `${t.camelName}=${t.name}`).sort();
}

const noSignal = new AbortController().signal;

describe("which tools guest code may call", () => {
  const agentTools = [readFile, ls, writeFile, webSearch, evalTool, task];

  it('"safe" exposes only the read-only file tools present on the agent', () => {
    expect(names(resolver({ ptc: "safe" }).resolve(agentTools))).toEqual(["ls=ls", "readFile=read_file"]);
  });

  it('"all" exposes every tool except task and the eval tool', () => {
    const view = resolver({ ptc: "all", ptcAcknowledgeUnsafe: true }).resolve(agentTools);
    expect(names(view)).toEqual(["ls=ls", "readFile=read_file", "webSearch=web_search", "writeFile=write_file"]);
  });

  it('"safe" mixed with a name adds that tool', () => {
    expect(names(resolver({ ptc: ["safe", "web_search"] }).resolve(agentTools))).toEqual([
      "ls=ls",
      "readFile=read_file",
      "webSearch=web_search",
    ]);
  });

  it("tool instances are exposed without being on the agent", () => {
    expect(names(resolver({ ptc: [webSearch] }).resolve([readFile]))).toEqual(["webSearch=web_search"]);
  });

  it("a misspelt tool name fails loudly, listing the agent's tools", () => {
    expect(() => resolver({ ptc: ["web_serch"] }).resolve(agentTools)).toThrow(
      /"web_serch", which is not a tool of this agent \(tools: read_file, ls/,
    );
  });

  it("a named tool seen in an earlier turn may be filtered out of a later turn", () => {
    const r = resolver({ ptc: ["web_search"] });
    r.resolve(agentTools);
    expect(names(r.resolve([readFile]))).toEqual([]);
  });

  it("a preset that would put two tools on one camel-cased name is refused", () => {
    const dashed = fileTool("read-file");
    expect(() => resolver({ ptc: "all", ptcAcknowledgeUnsafe: true }).resolve([readFile, dashed])).toThrow(
      /would both be tools\.readFile/,
    );
  });

  it("guest code reaches a tool by its own name too, when that is a plain identifier", () => {
    const view = resolver({ ptc: [readFile, ls, fileTool("get-page"), fileTool("__proto__")] }).resolve([]);
    const guestNames = [...view.byGuestName].map(([guestName, t]) => `${guestName}=${t.name}`).sort();
    expect(guestNames).toEqual([
      "getPage=get-page",
      "ls=ls",
      "proto=__proto__",
      "readFile=read_file",
      "read_file=read_file",
    ]);
  });
});

function ptcTarget(t: ReturnType<typeof tool>): PtcTool {
  return { name: t.name, camelName: camelCaseToolName(t.name), tool: t as PtcTool["tool"] };
}

describe("one eval's PTC calls", () => {
  it("the call budget is per eval, and refusals are PTCCallBudgetExceededError", async () => {
    const ctx = new PtcEvalContext({}, { maxPtcCalls: 2, ptcQuotas: new Map() });
    const t = ptcTarget(webSearch);
    await ctx.call(t, [{ query: "a" }], noSignal);
    await ctx.call(t, [{ query: "b" }], noSignal);
    const refused = ctx.call(t, [{ query: "c" }], noSignal);
    await expect(refused).rejects.toBeInstanceOf(PTCCallBudgetExceededError);
    await expect(refused).rejects.toMatchObject({
      name: "PTCCallBudgetExceededError",
      limit: 2,
      toolName: "web_search",
    });
    expect(ctx.calls).toBe(2);
    const next = new PtcEvalContext({}, { maxPtcCalls: 2, ptcQuotas: new Map() });
    await expect(next.call(t, [{ query: "d" }], noSignal)).resolves.toEqual({ hits: ["d"] });
  });

  it("the budget and quota errors name the tool that was refused", async () => {
    const ctx = new PtcEvalContext({}, { maxPtcCalls: 1, ptcQuotas: new Map() });
    await ctx.call(ptcTarget(readFile), [{}], noSignal);
    await expect(ctx.call(ptcTarget(webSearch), [{ query: "c" }], noSignal)).rejects.toThrow(
      /^tools\.webSearch was refused: this eval already made 1 tool calls/,
    );
    const quoted = new PtcEvalContext({}, { maxPtcCalls: 256, ptcQuotas: new Map([["web_search", 1]]) });
    await quoted.call(ptcTarget(webSearch), [{ query: "a" }], noSignal);
    await expect(quoted.call(ptcTarget(webSearch), [{ query: "b" }], noSignal)).rejects.toThrow(
      /^tools\.webSearch was refused: .*1 calls to web_search/,
    );
  });

  it("null budget is unlimited", async () => {
    const ctx = new PtcEvalContext({}, { maxPtcCalls: null, ptcQuotas: new Map() });
    const t = ptcTarget(webSearch);
    for (let i = 0; i < 300; i++) await ctx.call(t, [{ query: String(i) }], noSignal);
    expect(ctx.calls).toBe(300);
  });

  it("a per-tool quota limits that tool only", async () => {
    const ctx = new PtcEvalContext({}, { maxPtcCalls: 256, ptcQuotas: new Map([["web_search", 1]]) });
    await ctx.call(ptcTarget(webSearch), [{ query: "a" }], noSignal);
    await expect(ctx.call(ptcTarget(webSearch), [{ query: "b" }], noSignal)).rejects.toThrow(/1 calls to web_search/);
    await expect(ctx.call(ptcTarget(readFile), [{}], noSignal)).resolves.toBe("read_file output");
    expect(Object.fromEntries(ctx.callsByTool)).toEqual({ web_search: 1, read_file: 1 });
  });

  it("input must be one object; no argument means {}", async () => {
    const ctx = new PtcEvalContext({}, { maxPtcCalls: 256, ptcQuotas: new Map() });
    await expect(ctx.call(ptcTarget(webSearch), ["query"], noSignal)).rejects.toThrow(/takes one object argument/);
    await expect(ctx.call(ptcTarget(webSearch), [{ query: "a" }, {}], noSignal)).rejects.toThrow(
      /takes one object argument/,
    );
    await expect(ctx.call(ptcTarget(readFile), [], noSignal)).resolves.toBe("read_file output");
  });

  it("schema validation failures reject with the tool's message", async () => {
    const ctx = new PtcEvalContext({}, { maxPtcCalls: 256, ptcQuotas: new Map() });
    await expect(ctx.call(ptcTarget(webSearch), [{ query: 42 }], noSignal)).rejects.toThrow(
      /did not match expected schema/,
    );
  });

  it("tool errors keep their class name and message, without the host stack", async () => {
    class RateLimitError extends Error {}
    const failing = tool(
      async () => {
        throw new RateLimitError("slow down");
      },
      { name: "flaky", description: "", schema: z.object({}) },
    );
    const ctx = new PtcEvalContext({}, { maxPtcCalls: 256, ptcQuotas: new Map() });
    const err: unknown = await ctx.call(ptcTarget(failing), [{}], noSignal).catch((e: unknown) => e);
    expect(err).toMatchObject({ name: "RateLimitError", message: "slow down" });
    expect((err as Error).stack).toBe("RateLimitError: slow down");
  });

  it("calls run as child runs of the eval's callbacks, with a derived tool call id and no reused run id", async () => {
    const started: { name: string; runId: string; parentRunId: string | undefined; toolCallId: string | undefined }[] =
      [];
    class Recorder extends BaseCallbackHandler {
      name = "recorder";
      override handleToolStart(
        _tool: { id: string[] },
        _input: string,
        runId: string,
        parentRunId?: string,
        _tags?: string[],
        _meta?: Record<string, unknown>,
        _runName?: string,
        toolCallId?: string,
      ) {
        started.push({ name: _runName ?? "", runId, parentRunId, toolCallId });
      }
    }
    const manager = new CallbackManager("parent-run");
    manager.addHandler(new Recorder());
    let seenConfig: Record<string, unknown> | undefined;
    const spy = tool(
      async (_input: Record<string, never>, config) => {
        seenConfig = config as Record<string, unknown>;
        return "ok";
      },
      { name: "spy", description: "", schema: z.object({}) },
    );
    const config: EvalRunConfig = {
      callbacks: manager,
      runId: "eval-run",
      runName: "eval",
      toolCall: { id: "call_7", name: "eval", args: {}, type: "tool_call" },
      configurable: { thread_id: "t1" },
      state: { files: {} },
    };
    const ctx = new PtcEvalContext(config, { maxPtcCalls: 256, ptcQuotas: new Map() });
    await ctx.call(ptcTarget(spy), [{}], noSignal);
    await ctx.call(ptcTarget(spy), [{}], noSignal);
    expect(started).toHaveLength(2);
    expect(started[0]?.parentRunId).toBe("parent-run");
    expect(started[0]?.runId).not.toBe("eval-run");
    expect(started[0]?.name).toBe("spy");
    expect(seenConfig?.toolCallId).toBe("call_7:ptc:2");
    expect((seenConfig?.configurable as Record<string, unknown> | undefined)?.thread_id).toBe("t1");
    expect(seenConfig?.toolCall).toBeUndefined();
  });

  it("the eval's abort reaches the tool through its signal", async () => {
    let aborted = false;
    let started!: () => void;
    const running = new Promise<void>((r) => (started = r));
    const slow = tool(
      async (_i: Record<string, never>, config) => {
        started();
        await new Promise<void>((resolve) =>
          config.signal?.addEventListener(
            "abort",
            () => {
              aborted = true;
              resolve();
            },
            { once: true },
          ),
        );
        return "stopped";
      },
      { name: "slow", description: "", schema: z.object({}) },
    );
    const evalAbort = new AbortController();
    const ctx = new PtcEvalContext({}, { maxPtcCalls: 256, ptcQuotas: new Map() });
    const pending = ctx.call(ptcTarget(slow), [{}], evalAbort.signal);
    await running;
    evalAbort.abort();
    await pending.catch(() => undefined);
    expect(aborted).toBe(true);
  });

  it("Command updates are collected, and later calls in the same eval see them in state", async () => {
    const write = tool(
      async ({ path }: { path: string }, config) => {
        const id = (config as { toolCallId?: string }).toolCallId;
        return new Command({
          update: {
            files: { [path]: "content" },
            messages: [new ToolMessage({ content: `wrote ${path}`, tool_call_id: id ?? "" })],
          },
        });
      },
      { name: "write_file", description: "", schema: z.object({ path: z.string() }) },
    );
    const list = tool(
      async (_i: Record<string, never>, config) =>
        Object.keys((config as { state?: { files?: object } }).state?.files ?? {}),
      {
        name: "ls",
        description: "",
        schema: z.object({}),
      },
    );
    const ctx = new PtcEvalContext({ state: { files: { "/old": "x" } } }, { maxPtcCalls: 256, ptcQuotas: new Map() });
    expect(await ctx.call(ptcTarget(write), [{ path: "/a" }], noSignal)).toBe("wrote /a");
    expect(await ctx.call(ptcTarget(list), [{}], noSignal)).toEqual(["/old", "/a"]);
    expect(ctx.updates).toEqual([["files", { "/a": "content" }]]);
  });
});

describe("tool output as guest values", () => {
  it("plain return values stay typed", () => {
    expect(toGuestValue({ hits: [1, 2] }).value).toEqual({ hits: [1, 2] });
    expect(toGuestValue(42).value).toBe(42);
  });

  it("a ToolMessage is unwrapped; JSON text stays a string", () => {
    expect(toGuestValue(new ToolMessage({ content: '{"a":1}', tool_call_id: "x" })).value).toBe('{"a":1}');
  });

  it("text content blocks are joined; other blocks stay structured", () => {
    const text = new ToolMessage({
      content: [
        { type: "text", text: "a" },
        { type: "text", text: "b" },
      ],
      tool_call_id: "x",
    });
    expect(toGuestValue(text).value).toBe("ab");
    expect(
      toGuestValue([
        { type: "text", text: "plain " },
        { type: "text", text: "blocks" },
      ]).value,
    ).toBe("plain blocks");
    expect(toGuestValue([]).value).toEqual([]);
    const image = new ToolMessage({ content: [{ type: "image_url", image_url: "data:," }], tool_call_id: "x" });
    expect(toGuestValue(image).value).toEqual([{ type: "image_url", image_url: "data:," }]);
  });

  it("an error ToolMessage becomes a rejection with its text", () => {
    expect(() =>
      toGuestValue(new ToolMessage({ content: "Error: denied", tool_call_id: "x", status: "error" })),
    ).toThrow("Error: denied");
  });

  it("class instances become plain data, shared references and cycles kept", () => {
    class Doc {
      constructor(
        public pageContent: string,
        public metadata: Record<string, unknown>,
      ) {}
    }
    const meta = { source: "a" };
    const docs = [new Doc("x", meta), new Doc("y", meta)];
    const value = toGuestValue(docs).value as { pageContent: string; metadata: object }[];
    expect(value).toEqual([
      { pageContent: "x", metadata: { source: "a" } },
      { pageContent: "y", metadata: { source: "a" } },
    ]);
    expect(Object.getPrototypeOf(value[0])).toBe(Object.prototype);
    expect(value[0]?.metadata).toBe(value[1]?.metadata);
    const cyclic: Record<string, unknown> = { name: "c" };
    cyclic.self = cyclic;
    const out = toGuestValue(cyclic).value as Record<string, unknown>;
    expect(out.self).toBe(out);
  });

  it("a list of ToolMessages gives the last one's content", () => {
    const list = [
      new ToolMessage({ content: "first", tool_call_id: "x" }),
      new ToolMessage({ content: "second", tool_call_id: "x" }),
    ];
    expect(toGuestValue(list)).toEqual({ value: "second", updates: [] });
    expect(() =>
      toGuestValue([list[0], new ToolMessage({ content: "Error: denied", tool_call_id: "x", status: "error" })]),
    ).toThrow("Error: denied");
  });

  it("a Command inside a list gives its last message's content and its state updates", () => {
    const cmd = new Command({
      update: { files: { "/a": 1 }, messages: [new ToolMessage({ content: "from command", tool_call_id: "x" })] },
    });
    expect(toGuestValue([cmd])).toEqual({ value: "from command", updates: [["files", { "/a": 1 }]] });
    const later = new Command({ update: { todos: [1] } });
    // The last message anywhere in the list answers; every Command's updates apply, in order.
    expect(toGuestValue([cmd, later])).toEqual({
      value: "from command",
      updates: [
        ["files", { "/a": 1 }],
        ["todos", [1]],
      ],
    });
    expect(toGuestValue([cmd, new ToolMessage({ content: "last", tool_call_id: "x" })]).value).toBe("last");
  });

  it("a list mixing plain data and messages stays a list of plain data", () => {
    expect(toGuestValue([1, new ToolMessage({ content: "m", tool_call_id: "x" })]).value).toEqual([1, "m"]);
  });

  it("a Command gives its ToolMessage's content as the value and drops its messages from the updates", () => {
    const cmd = new Command({
      update: { files: { "/a": 1 }, messages: [new ToolMessage({ content: "done", tool_call_id: "x" })] },
    });
    expect(toGuestValue(cmd)).toEqual({ value: "done", updates: [["files", { "/a": 1 }]] });
  });
});
