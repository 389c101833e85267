import { describe, expect, it } from "vitest";
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import { Sandbox } from "../../src/sandbox.js";
import { EvalActivity } from "../../src/langchain/activity.js";
import {
  checkResponseSchema,
  InFlightLimiter,
  parseTaskRequest,
  RESPONSE_SCHEMA_LIMITS,
  SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY,
  subagentsOf,
  TaskDispatcher,
} from "../../src/langchain/task.js";
import { resolveOptions } from "../../src/langchain/options.js";

const TYPES = ["general-purpose", "reviewer"];

describe("task() requests", () => {
  it("accepts camelCase and snake_case fields and keeps only what was given", () => {
    expect(
      parseTaskRequest([{ description: "d", subagent_type: "reviewer", response_schema: { type: "object" } }], TYPES),
    ).toEqual({
      description: "d",
      subagentType: "reviewer",
      responseSchema: { type: "object" },
    });
    expect(parseTaskRequest([{ description: "d", subagentType: "reviewer", label: "file a" }], TYPES)).toEqual({
      description: "d",
      subagentType: "reviewer",
      label: "file a",
    });
  });

  it("rejects a field given in both spellings, non-object arguments and a non-string label", () => {
    expect(() =>
      parseTaskRequest([{ description: "d", subagentType: "reviewer", subagent_type: "reviewer" }], TYPES),
    ).toThrow(/subagentType is given twice/);
    expect(() => parseTaskRequest(["review a.ts"], TYPES)).toThrow(/task takes one object argument/);
    expect(() => parseTaskRequest([[]], TYPES)).toThrow(/task takes one object argument/);
    expect(() => parseTaskRequest([{ description: "d", subagentType: "reviewer", label: 3 }], TYPES)).toThrow(
      /label must be a string, got 3/,
    );
  });

  it("names the valid types when the type is unknown or blank", () => {
    expect(() => parseTaskRequest([{ description: "d", subagentType: "Reviewer" }], TYPES)).toThrow(
      'task: unknown subagentType "Reviewer"; valid types: "general-purpose", "reviewer"',
    );
    expect(() => parseTaskRequest([{ description: "d", subagentType: " " }], TYPES)).toThrow(
      /one of "general-purpose", "reviewer"/,
    );
  });
});

/** `{ type: "string" }` wrapped in `levels` nested `properties` objects. */
function nested(levels: number): Record<string, unknown> {
  let schema: Record<string, unknown> = { type: "string" };
  for (let i = 1; i <= levels; i++) schema = { type: "object", properties: { [`p${i}`]: schema } };
  return schema;
}

describe("responseSchema limits", () => {
  it("accepts a string inside 5 nested properties levels and rejects 6, naming the depth limit", () => {
    expect(checkResponseSchema(nested(5))).toEqual(nested(5));
    expect(() => checkResponseSchema(nested(6))).toThrow(
      "task: responseSchema nests schemas 6 levels deep; the depth limit is 5",
    );
  });

  it("counts array item schemas and anyOf branches as levels, but not enum or default values", () => {
    const wrap = (key: "items" | "anyOf", levels: number): Record<string, unknown> => {
      let schema: Record<string, unknown> = { type: "string" };
      for (let i = 0; i < levels; i++)
        schema = key === "items" ? { type: "array", items: schema } : { anyOf: [schema] };
      return schema;
    };
    expect(checkResponseSchema(wrap("items", 5))).toEqual(wrap("items", 5));
    expect(() => checkResponseSchema(wrap("items", 6))).toThrow(/6 levels deep/);
    expect(checkResponseSchema(wrap("anyOf", 5))).toEqual(wrap("anyOf", 5));
    expect(() => checkResponseSchema(wrap("anyOf", 6))).toThrow(/6 levels deep/);
    const data = { type: "string", default: { a: { b: { c: { d: { e: { f: 1 } } } } } }, enum: [[[[[["x"]]]]]] };
    expect(checkResponseSchema(data)).toEqual(data);
  });

  it("rejects more than 32 properties in total, nested ones included, naming the property limit", () => {
    const props = (n: number, prefix: string) =>
      Object.fromEntries(Array.from({ length: n }, (_, i) => [`${prefix}${i}`, { type: "string" }]));
    expect(() =>
      checkResponseSchema({
        type: "object",
        properties: { ...props(20, "a"), inner: { type: "object", properties: props(12, "b") } },
      }),
    ).toThrow("task: responseSchema declares 33 properties in total; the limit is 32");
    expect(checkResponseSchema({ type: "object", properties: props(32, "a") })).toBeTruthy();
  });

  it("rejects a schema over 4096 bytes serialized, naming the byte limit", () => {
    const big = { type: "object", description: "x".repeat(RESPONSE_SCHEMA_LIMITS.maxBytes) };
    expect(() => checkResponseSchema(big)).toThrow(/bytes serialized; the limit is 4096 bytes/);
  });

  it("rejects values that are not JSON Schema objects, and cycles", () => {
    expect(() => checkResponseSchema("object")).toThrow(/must be a JSON Schema object/);
    expect(() => checkResponseSchema([{ type: "string" }])).toThrow(/must be a JSON Schema object/);
    const cyclic: Record<string, unknown> = { type: "object" };
    cyclic["self"] = cyclic;
    expect(() => checkResponseSchema(cyclic)).toThrow(/plain JSON/);
  });
});

describe("InFlightLimiter", () => {
  it("grants slots up to its cap, then in arrival order as slots are released", async () => {
    const limiter = new InFlightLimiter(2);
    const never = new AbortController().signal;
    const order: number[] = [];
    await limiter.acquire(never);
    await limiter.acquire(never);
    const waiting = [3, 4].map((n) => limiter.acquire(never).then(() => order.push(n)));
    expect(limiter.queued).toBe(2);
    limiter.release();
    await waiting[0];
    limiter.release();
    await waiting[1];
    expect(order).toEqual([3, 4]);
    expect(limiter.active).toBe(2);
  });

  it("rejects a waiter beyond the queue bound, saying the queue is full", async () => {
    const limiter = new InFlightLimiter(1, 2);
    const never = new AbortController().signal;
    await limiter.acquire(never);
    const queued = [limiter.acquire(never), limiter.acquire(never)];
    await expect(limiter.acquire(never)).rejects.toThrow(
      "task: 2 subagent calls are already waiting, the limit; await some before starting more",
    );
    limiter.release();
    limiter.release();
    await Promise.all(queued);
    expect(limiter.queued).toBe(0);
  });

  it("drops a queued waiter whose signal fires, without consuming a slot", async () => {
    const limiter = new InFlightLimiter(1);
    await limiter.acquire(new AbortController().signal);
    const controller = new AbortController();
    const queued = limiter.acquire(controller.signal);
    controller.abort(new Error("eval ended"));
    await expect(queued).rejects.toThrow("eval ended");
    expect(limiter.queued).toBe(0);
    limiter.release();
    expect(limiter.active).toBe(0);
  });
});

describe("subagent catalog", () => {
  it("reads names from deepagents' subagent_type field and descriptions from the tool description", () => {
    const task = tool(async () => "", {
      name: "task",
      description:
        "Launch a subagent.\n\nAvailable agent types:\n- general-purpose: Does anything.\n- reviewer: Reviews one file.\n\nUsage notes: …",
      schema: z.object({
        description: z.string(),
        subagent_type: z.string().describe("Name of the agent to use. Available: general-purpose, reviewer"),
      }),
    });
    expect(subagentsOf(task)).toEqual([
      { name: "general-purpose", description: "Does anything." },
      { name: "reviewer", description: "Reviews one file." },
    ]);
  });

  it("uses deepagents' own key for dynamic response formats", async () => {
    const deepagents = await import("deepagents");
    expect(SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY).toBe(deepagents.SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY);
  });
});

describe("subagent options", () => {
  it("subagentTimeoutMs defaults to 10 minutes and must be a positive integer", () => {
    expect(resolveOptions({}).subagentTimeoutMs).toBe(600_000);
    expect(resolveOptions({ subagentTimeoutMs: 1000 }).subagentTimeoutMs).toBe(1000);
    expect(() => resolveOptions({ subagentTimeoutMs: 0 })).toThrow(/subagentTimeoutMs must be an integer/);
  });
});

describe("installing task()", () => {
  const activity = new EvalActivity("eval", undefined);
  const taskTool = tool(
    async ({ description }: { description: string; subagent_type: string }) => `done: ${description}`,
    {
      name: "task",
      description: "- reviewer: Reviews one file.",
      schema: z.object({ description: z.string(), subagent_type: z.string().describe("Available: reviewer") }),
    },
  );

  it("routes calls to the eval that is running, and refuses them once it has ended", async () => {
    using sandbox = new Sandbox();
    const dispatcher = new TaskDispatcher({ subagents: true, subagentTimeoutMs: 1000 });
    const session = {};
    dispatcher.observe([taskTool], session);
    const scope = dispatcher.begin(session, sandbox, {}, 5000, activity);
    expect(scope?.wallTimeoutMs).toBe(6000);
    expect(await sandbox.eval(`await task({ description: "a.ts", subagentType: "reviewer" })`)).toBe("done: a.ts");
    expect(activity.subagentCalls).toBe(1);
    scope!.end();
    await expect(sandbox.eval(`await task({ description: "a.ts", subagentType: "reviewer" })`)).rejects.toThrow(
      /task\(\) is not available in this eval/,
    );
  });

  it("numbers task() calls in call order, journaled ones included: a replayed eval's next live call keeps the id of its first run", async () => {
    const ids: unknown[] = [];
    const recording = tool(
      async ({ description }: { description: string; subagent_type: string }, config) => {
        ids.push((config as { toolCallId?: unknown }).toolCallId);
        return `done: ${description}`;
      },
      {
        name: "task",
        description: "- reviewer: Reviews one file.",
        schema: z.object({ description: z.string(), subagent_type: z.string().describe("Available: reviewer") }),
      },
    );
    // A replay: the first call is answered from the journal, the second runs live.
    const gate = {
      call: async (
        request: { args: Record<string, unknown> },
        live: (args: Record<string, unknown>) => Promise<{ value: unknown; updates: [] }>,
        journaled?: () => void,
      ) => {
        if (request.args["description"] !== "a.ts") return live(request.args);
        journaled?.();
        return { value: "done: a.ts", updates: [] };
      },
    };
    using sandbox = new Sandbox();
    const dispatcher = new TaskDispatcher({ subagents: true, subagentTimeoutMs: 1000 });
    const session = {};
    dispatcher.observe([recording], session);
    const counted = new EvalActivity("eval", undefined);
    dispatcher.begin(session, sandbox, {}, 5000, counted, gate as never);
    await sandbox.eval(
      `await task({ description: "a.ts", subagentType: "reviewer" }); await task({ description: "b.ts", subagentType: "reviewer" })`,
    );
    expect(ids).toEqual(["eval:task:2"]);
    expect(counted.subagentCalls).toBe(2);
  });

  it("a subagent that interrupts for human input rejects saying code cannot wait for it", async () => {
    const { GraphInterrupt } = await import("@langchain/langgraph");
    const interrupting = tool(
      async () => {
        throw new GraphInterrupt([{ id: "i1", value: "approve?" }]);
      },
      {
        name: "task",
        description: "- reviewer: Reviews one file.",
        schema: z.object({ description: z.string(), subagent_type: z.string().describe("Available: reviewer") }),
      },
    );
    using sandbox = new Sandbox();
    const dispatcher = new TaskDispatcher({ subagents: true, subagentTimeoutMs: 1000 });
    const session = {};
    dispatcher.observe([interrupting], session);
    dispatcher.begin(session, sandbox, {}, 5000, activity);
    await expect(sandbox.eval(`await task({ description: "a.ts", subagentType: "reviewer" })`)).rejects.toThrow(
      /Subagent "reviewer" failed: it asked for human input .* call the task tool directly/,
    );
  });

  it("leaves a guest's own non-configurable `task` in place instead of failing the eval", () => {
    using sandbox = new Sandbox();
    sandbox.evalSync("var task = 'mine'");
    const dispatcher = new TaskDispatcher({ subagents: true, subagentTimeoutMs: 1000 });
    const session = {};
    dispatcher.observe([taskTool], session);
    expect(() => dispatcher.begin(session, sandbox, {}, 5000, activity)).not.toThrow();
    expect(sandbox.evalSync("task")).toBe("mine");
  });

  it("is not installed when subagents is false or the agent has no task tool", () => {
    using sandbox = new Sandbox();
    const off = new TaskDispatcher({ subagents: false, subagentTimeoutMs: 1000 });
    expect(off.observe([taskTool], {})).toBeUndefined();
    expect(off.begin({}, sandbox, {}, 5000, activity)).toBeUndefined();
    const none = new TaskDispatcher({ subagents: true, subagentTimeoutMs: 1000 });
    const session = {};
    expect(none.observe([], session)).toBeUndefined();
    expect(none.begin(session, sandbox, {}, 5000, activity)).toBeUndefined();
    expect(sandbox.evalSync("typeof task")).toBe("undefined");
  });
});
