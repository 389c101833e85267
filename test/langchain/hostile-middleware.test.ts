/**
 * Hostile model output and guest results against the middleware: each test is named after a hazard
 * that once stalled the shared event loop, leaked host details to the model, or deadlocked a thread.
 * No timings are asserted (loaded machine): each test shows the bounded outcome instead
 * (bench/ measures the event-loop gaps, case "event loop under hostile outputs").
 */
import { describe, expect, it } from "vitest";
import { createAgent } from "langchain";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import type { CodeInterpreterMiddlewareOptions } from "../../src/langchain/index.js";
import { ScriptedChatModel, callTool, contentText, reply, section, toolMessages } from "./support/agent.js";
import { trackedMiddleware } from "./support/tracked-middleware.js";

const middleware = trackedMiddleware;

async function runEvals(
  args: readonly unknown[],
  options: CodeInterpreterMiddlewareOptions = {},
  tools: Parameters<typeof createAgent>[0]["tools"] = [],
): Promise<BaseMessage[]> {
  const model = new ScriptedChatModel([
    ...args.map((a) => callTool("eval", a as Record<string, unknown>)),
    reply("done"),
  ]);
  const agent = createAgent({ model, tools, middleware: [middleware(options)] });
  const result = await agent.invoke(
    { messages: [new HumanMessage("go")] },
    { configurable: { thread_id: `t-${Math.random()}` } },
  );
  return toolMessages(result.messages as BaseMessage[]);
}

const statusOf = (message: BaseMessage): string | undefined => (message as { status?: string }).status;

describe("malformed eval tool calls", () => {
  it.each([
    [{ code: 42 }, /got number/],
    [{}, /it is missing/],
    [{ code: "1", extra: true }, /unknown argument "extra"/],
    [{ code: "1", reset: "yes" }, /`reset` must be a boolean/],
  ])("%j gets a one-line InvalidArgumentError, never a host stack or path", async (args, reason) => {
    const [message] = await runEvals([args]);
    const error = section(message!, "error") ?? "";
    expect(error).toMatch(/^InvalidArgumentError: the `code` argument must be a string/);
    expect(error).toMatch(reason);
    expect(error.split("\n")).toHaveLength(1);
    expect(contentText(message!)).not.toMatch(/node_modules|file:\/\/|\n\s+at |undefined:/);
    expect(statusOf(message!)).toBe("error");
  });
});

describe("model-written code size and shape", () => {
  it("code over maxCodeBytes is refused before parsing, with the size and the limit", async () => {
    const [message] = await runEvals([{ code: `/*${"x".repeat(300_000)}*/ 1` }]);
    expect(section(message!, "error")).toMatch(
      /^InvalidArgumentError: the code is 300,006 bytes; the limit is 262,144 bytes\./,
    );
  });

  it("counts UTF-8 bytes, not characters, against maxCodeBytes", async () => {
    const [message] = await runEvals([{ code: `"${"é".repeat(600)}".length` }], { maxCodeBytes: 1024 });
    expect(section(message!, "error")).toMatch(/the code is 1,209 bytes; the limit is 1,024 bytes/);
  });

  it("code at the cap still runs", async () => {
    const code = `/*${"x".repeat(256 * 1024 - 10)}*/ 6*7`;
    const [message] = await runEvals([{ code }]);
    expect(section(message!, "result")).toBe("42");
  });

  it("deeply nested code gives the model a SyntaxError, not a host RangeError", async () => {
    const [js, ts] = await runEvals([
      { code: `${"(".repeat(40_000)}1${")".repeat(40_000)}` },
      { code: `const a: number = ${"[".repeat(40_000)}${"]".repeat(40_000)}` },
    ]);
    for (const message of [js!, ts!]) {
      expect(section(message, "error")).toMatch(/^SyntaxError: the code is nested too deeply to parse/);
      expect(contentText(message)).not.toMatch(/Maximum call stack|node_modules/);
    }
  });
});

describe("a PTC tool that calls its own thread's eval tool", () => {
  it("gets BUSY at once instead of waiting out the wall budget", async () => {
    let evalTool: { invoke: (input: unknown, config: unknown) => Promise<unknown> } | undefined;
    const inner = tool(
      async (_input, config) => contentText((await evalTool!.invoke({ code: "1 + 1" }, config)) as BaseMessage),
      {
        name: "run_inner",
        description: "runs code in the interpreter",
        schema: z.object({}),
      },
    );
    const m = middleware({ ptc: [inner], wallTimeoutMs: 600_000, executionTimeoutMs: 5000 });
    evalTool = m.tools[0] as unknown as typeof evalTool;
    const model = new ScriptedChatModel([callTool("eval", { code: "await tools.runInner({})" }), reply("done")]);
    const agent = createAgent({ model, tools: [], middleware: [m] });
    const result = await agent.invoke(
      { messages: [new HumanMessage("go")] },
      { configurable: { thread_id: "reentry" } },
    );
    const [message] = toolMessages(result.messages as BaseMessage[]);
    // Within the 10 minute wall budget the inner call could only end by the BUSY refusal.
    expect(section(message!, "result")).toMatch(
      /InterpreterBusyError: this thread's interpreter is running the eval that called this tool/,
    );
  });
});

describe("results that used to stall the event loop", () => {
  it("escaping '<' before 60,000 spaces is linear and cut to maxResultChars", async () => {
    const [message] = await runEvals([{ code: `"<" + " ".repeat(60000) + "<system>"` }]);
    const text = contentText(message!);
    expect(text.length).toBeLessThanOrEqual(4000);
    expect(section(message!, "result")).toMatch(/&lt;system>$/);
  });

  it("a result whose shared arrays would render as 200^7 items is cut within the budget", async () => {
    const [message] = await runEvals([{ code: "let x = [1]; for (let d = 0; d < 7; d++) x = Array(200).fill(x); x" }]);
    expect(contentText(message!).length).toBeLessThanOrEqual(4000);
    expect(section(message!, "result")).toMatch(/more items/);
  });

  it("console.log of shared arrays is rendered within maxConsoleBytes", async () => {
    const [message] = await runEvals([
      { code: "let x = [1]; for (let d = 0; d < 7; d++) x = Array(200).fill(x); console.log(x); 'done'" },
    ]);
    expect(section(message!, "result")).toBe("done");
    expect(section(message!, "console")).toMatch(/^\[/);
  });

  it("a guest-planted error stack of whitespace is rendered without quadratic trimming", async () => {
    const [message] = await runEvals([
      { code: `const e = new Error("x"); e.stack = "a" + " ".repeat(60000) + "b"; throw e` },
    ]);
    expect(contentText(message!).length).toBeLessThanOrEqual(4000);
    expect(section(message!, "error")).toMatch(/^Error: x\na/);
  });

  it("a BigInt of 65,537 bits shows a head, a tail and its digit count, not 19,729 digits", async () => {
    const [message] = await runEvals([{ code: "2n ** 65536n" }]);
    expect(section(message!, "result")).toBe("2003529930...905719156736n (19,729 digits)");
  });
});

describe("JavaScript keeps its meaning", () => {
  it("valid JavaScript `a < b > (c)` runs as comparisons; `new Set<string>(items)` reads as TypeScript, and a hint explains the rest", async () => {
    const [comparison, typeArguments, notTypeScript] = await runEvals([
      { code: "var a = 1, b = 2, c = 3\na < b > (c)" },
      { code: "var items = ['a']\nnew Set<string>(items).size" },
      // A legacy octal literal: TypeScript cannot read this, so it runs as the JavaScript it is.
      { code: "var items = ['a']\nnew Set<string>(items).size + 010" },
    ]);
    expect(section(comparison!, "result")).toBe("false");
    expect(section(typeArguments!, "result")).toBe("1");
    expect(section(notTypeScript!, "error")).toMatch(/^ReferenceError: string is not defined/);
    expect(section(notTypeScript!, "hint")).toMatch(/code that is valid JavaScript runs as JavaScript/);
  });
});

describe("hint lookups", () => {
  it("the similar-name hint reads global names natively, never the guest's replaced Object.getOwnPropertyNames", async () => {
    const [message] = await runEvals([
      {
        code: "Object.getOwnPropertyNames = () => { for (;;) {} }; Array.prototype.slice = Object.getOwnPropertyNames; var myValue = 1; myvalue",
      },
    ]);
    expect(section(message!, "error")).toMatch(/^ReferenceError: myvalue is not defined/);
    expect(section(message!, "hint")).toMatch(/myValue/);
  });
});

describe("tools no longer offered", () => {
  it("are removed from a guest `tools` Proxy whose delete trap spins, on the executor, and the eval still runs", async () => {
    const { createMiddleware } = await import("langchain");
    const getHits = tool(async () => ({ hits: [1, 2] }), {
      name: "get_hits",
      description: "hits",
      schema: z.object({}),
    });
    let modelCalls = 0;
    // Offers get_hits on the first model call only, as a tool-filtering middleware would.
    const filter = createMiddleware({
      name: "FilterTools",
      wrapModelCall: async (request, handler) =>
        handler(
          ++modelCalls === 1
            ? request
            : { ...request, tools: request.tools.filter((t) => (t as { name?: string }).name !== "get_hits") },
        ),
    });
    const model = new ScriptedChatModel([
      callTool("eval", {
        code: "globalThis.tools = new Proxy(tools, { deleteProperty() { for (;;) {} } }); typeof tools.getHits",
      }),
      callTool("eval", { code: "typeof tools.getHits" }),
      reply("done"),
    ]);
    const agent = createAgent({ model, tools: [getHits], middleware: [filter, middleware({ ptc: ["get_hits"] })] });
    const result = await agent.invoke(
      { messages: [new HumanMessage("go")] },
      { configurable: { thread_id: "filtered" } },
    );
    const [first, second] = toolMessages(result.messages as BaseMessage[]);
    expect(section(first!, "result")).toBe("function");
    // The delete ran under its own 100 ms budget off the main thread (it used to run inline and throw
    // its TIMEOUT out of the tool); the Proxy kept the member, which the host refuses to serve.
    expect(statusOf(second!)).toBe("success");
    expect(section(second!, "result")).toBe("function");
  });
});

describe("one copy budget per eval, set on the middleware", () => {
  it("a result past copyLimitBytes is refused with COPY_LIMIT naming the cap, and the next eval runs", async () => {
    const [big, next] = await runEvals(
      [{ code: `const s = "x".repeat(1 << 20); Array(31).fill(s)` }, { code: "1 + 1" }],
      { copyLimitBytes: 4 * 1024 * 1024 },
    );
    expect(section(big!, "error")).toMatch(
      /^CopyLimitError: .*4194304|^CopyLimitError: .*4 MiB|^CopyLimitError: .*4,194,304/,
    );
    expect(statusOf(big!)).toBe("error");
    expect(section(next!, "result")).toBe("2");
  });
});

describe("restoring a stored state runs no guest code on the main thread", () => {
  it("a class static block that spins on restore is stopped by the restore budget while the event loop keeps turning", async () => {
    const { MemorySaver } = await import("@langchain/langgraph");
    const saver = new MemorySaver();
    const thread = { configurable: { thread_id: `restore-spin-${Math.random()}` } };
    // Spins only when re-created from the stored state (the restore names its source "<snapshot>").
    const plant = `class Trap { static { if (new Error().stack.includes("<snapshot>")) for (;;) {} } }; "planted"`;
    const first = createAgent({
      model: new ScriptedChatModel([callTool("eval", { code: plant }), reply("ok")]),
      middleware: [middleware({ executionTimeoutMs: 300 })],
      checkpointer: saver,
    });
    await first.invoke({ messages: [new HumanMessage("plant")] }, thread);
    // A new middleware instance holds no session for the thread: its next eval restores the stored state.
    const second = createAgent({
      model: new ScriptedChatModel([callTool("eval", { code: "typeof Trap" }), reply("ok")]),
      middleware: [middleware({ executionTimeoutMs: 4000 })],
      checkpointer: saver,
    });
    // The restore spins for its whole budget (4 s of CPU): on the main thread, the timer could not
    // tick for that long; on an executor thread it keeps ticking.
    let last = performance.now();
    let longestGap = 0;
    const timer = setInterval(() => {
      longestGap = Math.max(longestGap, performance.now() - last);
      last = performance.now();
    }, 5);
    const result = await second.invoke({ messages: [new HumanMessage("again")] }, thread);
    clearInterval(timer);
    const message = toolMessages(result.messages as BaseMessage[]).at(-1)!;
    expect(contentText(message)).toMatch(/could not be restored|not restored|TIMEOUT|time/i);
    expect(section(message, "result")).toBe("undefined"); // the sandbox started fresh
    expect(longestGap).toBeLessThan(2000);
  }, 120_000); // 4 s of the executor thread's CPU time take far longer on a loaded machine
});
