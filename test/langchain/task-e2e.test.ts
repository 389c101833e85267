import { afterEach, describe, expect, it } from "vitest";
import { createDeepAgent } from "deepagents";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import {
  createCodeInterpreterMiddleware,
  type CodeInterpreterMiddleware,
  type CodeInterpreterMiddlewareOptions,
} from "../../src/langchain/index.js";
import { ScriptedChatModel, callTool, contentText, reply, section, toolMessages } from "./support/agent.js";
import { FakeSubagentModel, type FakeSubagentOptions } from "./support/fake-subagent.js";

const live: CodeInterpreterMiddleware[] = [];
afterEach(() => {
  for (const m of live.splice(0)) m.dispose();
});

/** Files 0..39: odd ones have a finding; severity is the index modulo 4. */
const classifier = (task: string) => {
  const n = Number(/file-(\d+)/.exec(task)?.[1]);
  return { path: `file-${n}`, flagged: n % 2 === 1, severity: n % 4, note: `CLASSIFIER-DETAIL-${n}` };
};

interface DeepRun {
  codes: readonly string[];
  options?: CodeInterpreterMiddlewareOptions;
  classifier?: Partial<FakeSubagentOptions>;
  verifier?: Partial<FakeSubagentOptions>;
  signal?: AbortSignal;
  /** Stream the custom channel instead of invoking, collecting its chunks. */
  custom?: unknown[];
  /** More subagents besides the classifier and the verifier. */
  subagents?: unknown[];
}

/** Starts the agent run; the fake subagents' observers and the middleware are available at once. */
function startDeep(run: DeepRun) {
  const interpreter = createCodeInterpreterMiddleware(run.options ?? {});
  live.push(interpreter);
  const classifierModel = new FakeSubagentModel({ answer: classifier, ...run.classifier });
  const verifierModel = new FakeSubagentModel({
    answer: (t) => ({ confirmed: !t.includes("file-3 "), detail: `VERIFIER-DETAIL ${t}` }),
    ...run.verifier,
  });
  const model = new ScriptedChatModel([...run.codes.map((code) => callTool("eval", { code })), reply("final summary")]);
  const agent = createDeepAgent({
    model,
    middleware: [interpreter],
    subagents: [
      {
        name: "classifier",
        description: "Classifies one file.",
        systemPrompt: "Classify.",
        model: classifierModel,
        tools: [],
      },
      {
        name: "verifier",
        description: "Verifies one finding.",
        systemPrompt: "Verify.",
        model: verifierModel,
        tools: [],
      },
      ...((run.subagents ?? []) as []),
    ],
  });
  const done = finishDeep(run, agent, model);
  return { done, interpreter, classifier: classifierModel.observer, verifier: verifierModel.observer };
}

async function finishDeep(run: DeepRun, agent: ReturnType<typeof createDeepAgent>, model: ScriptedChatModel) {
  const input = { messages: [new HumanMessage("review every file")] };
  const config = {
    configurable: { thread_id: `task-${Math.random()}` },
    recursionLimit: 100,
    ...(run.signal ? { signal: run.signal } : {}),
  };
  let messages: BaseMessage[];
  if (run.custom !== undefined) {
    const stream = await agent.stream(input, { ...config, streamMode: ["custom", "values"] });
    let last: { messages: BaseMessage[] } | undefined;
    for await (const [mode, chunk] of stream as AsyncIterable<[string, unknown]>) {
      if (mode === "custom") run.custom.push(chunk);
      else last = chunk as { messages: BaseMessage[] };
    }
    messages = last?.messages ?? [];
  } else {
    messages = ((await agent.invoke(input, config)) as { messages: BaseMessage[] }).messages;
  }
  return { messages, evals: toolMessages(messages), model };
}

async function runDeep(run: DeepRun) {
  const started = startDeep(run);
  return { ...(await started.done), classifier: started.classifier, verifier: started.verifier };
}

const FLAG_SCHEMA = `{ type: "object", properties: { path: { type: "string" }, flagged: { type: "boolean" }, severity: { type: "integer" } }, required: ["path", "flagged", "severity"] }`;

describe("task() in a deep agent", () => {
  it("fans out over 40 items in batches of 10 with a schema, filters in JS, runs a second stage on the survivors; only the summary reaches the messages", async () => {
    const code = `
      const items = Array.from({ length: 40 }, (_, i) => "file-" + i);
      const flags = [];
      for (let i = 0; i < items.length; i += 10) {
        const batch = items.slice(i, i + 10);
        flags.push(...await Promise.all(batch.map((path) => task({
          description: "Classify " + path + " ",
          subagentType: "classifier",
          label: path,
          responseSchema: ${FLAG_SCHEMA},
        }))));
      }
      const typed = flags.every((f) => typeof f.flagged === "boolean" && typeof f.severity === "number");
      const survivors = flags.filter((f) => f.flagged && f.severity === 3);
      const verdicts = await Promise.all(survivors.map((f) => task({
        description: "Verify " + f.path + " ",
        subagent_type: "verifier",
        response_schema: { type: "object", properties: { confirmed: { type: "boolean" } }, required: ["confirmed"] },
      })));
      ({ typed, survivors: survivors.length, confirmed: verdicts.filter((v) => v.confirmed === true).length })`;
    const { messages, evals, classifier: c, verifier: v, model } = await runDeep({ codes: [code] });
    expect(section(evals[0]!, "result")).toBe("{ typed: true, survivors: 10, confirmed: 9 }");
    expect(c.started).toHaveLength(40);
    expect(c.maxInFlight).toBe(10);
    expect([...c.structured.values()].every(Boolean)).toBe(true);
    expect(v.started).toHaveLength(10);
    // The eval's outcome line counts the subagents; task() is not a tools.* call.
    expect(contentText(evals[0]!)).toContain("no tool calls; subagents: 50;");
    for (const m of messages) {
      expect(contentText(m)).not.toContain("CLASSIFIER-DETAIL");
      expect(contentText(m)).not.toContain("VERIFIER-DETAIL");
    }
    expect(messages.map((m) => m.getType())).toEqual(["human", "ai", "tool", "ai"]);
    expect(contentText(messages.at(-1)!)).toBe("final summary");
    expect(model.calls[0]!.systemPrompt).toContain("## Dispatching subagents with `task`");
    expect(model.calls[0]!.systemPrompt).toContain("- `verifier`: Verifies one finding.");
  });

  it("a subagent taking 8 s succeeds under the default 5 s executionTimeoutMs", { timeout: 30_000 }, async () => {
    const { evals, classifier: c } = await runDeep({
      codes: [
        `const r = await task({ description: "Classify file-7 ", subagentType: "classifier", responseSchema: ${FLAG_SCHEMA} }); r.flagged`,
      ],
      classifier: { delayMs: 8000 },
    });
    expect(section(evals[0]!, "result")).toBe("true");
    expect(c.completed).toHaveLength(1);
  });

  it("100 task() calls at once never exceed 32 in flight, and all complete", async () => {
    const { evals, classifier: c } = await runDeep({
      codes: [
        `const all = await Promise.all(Array.from({ length: 100 }, (_, i) => task({ description: "Classify file-" + i + " ", subagentType: "classifier" }))); all.length`,
      ],
      classifier: { delayMs: (t) => 5 + (Number(/file-(\d+)/.exec(t)?.[1]) % 7) * 3 },
    });
    expect(section(evals[0]!, "result")).toBe("100");
    expect(c.completed).toHaveLength(100);
    expect(c.maxInFlight).toBe(32);
  });

  it("task() calls do not count toward maxPtcCalls", async () => {
    const { evals } = await runDeep({
      codes: [
        `(await Promise.all([1, 2, 3].map((i) => task({ description: "Classify file-" + i + " ", subagentType: "classifier" })))).length`,
      ],
      options: { maxPtcCalls: 1 },
    });
    expect(section(evals[0]!, "result")).toBe("3");
  });

  it("aborting the run cancels the eval's in-flight subagents: their runs receive the abort", async () => {
    const controller = new AbortController();
    const run = startDeep({
      codes: [
        `await Promise.all([1, 2, 3, 4].map((i) => task({ description: "Classify file-" + i + " ", subagentType: "classifier" })))`,
      ],
      classifier: { delayMs: 20_000 },
      signal: controller.signal,
    });
    await run.classifier.whenStarted(4);
    const abortedAt = Date.now();
    controller.abort(new Error("user stopped"));
    await expect(run.done).rejects.toThrow();
    // Far below the 20 s the subagents would take, with room for a loaded machine.
    expect(Date.now() - abortedAt).toBeLessThan(10_000);
    await new Promise((r) => setTimeout(r, 50));
    expect(run.classifier.aborted.sort()).toEqual(run.classifier.started.sort());
    expect(run.classifier.completed).toEqual([]);
  });

  it("an eval that ends without awaiting its subagents cancels them", async () => {
    const { evals, classifier: c } = await runDeep({
      codes: [
        `task({ description: "Classify file-1 ", subagentType: "classifier" }); task({ description: "Classify file-2 ", subagentType: "classifier" });
        // A quick subagent lets the two slow ones get going before the program ends.
        await task({ description: "Classify file-0 ", subagentType: "classifier" }); "left early"`,
      ],
      classifier: { delayMs: (t) => (t.includes("file-0 ") ? 100 : 20_000) },
    });
    expect(section(evals[0]!, "result")).toBe("left early");
    await new Promise((r) => setTimeout(r, 50));
    expect(c.started).toHaveLength(3);
    expect(c.aborted.sort()).toEqual(["Classify file-1 ", "Classify file-2 "]);
    expect(c.completed).toEqual(["Classify file-0 "]);
  });

  it("a schema of depth 6 is rejected with a message naming the depth limit; the subagent never runs", async () => {
    const deep = `{ type: "object", properties: { a: { type: "object", properties: { b: { type: "array", items: { type: "object", properties: { c: { type: "object", properties: { d: { type: "object", properties: { e: { type: "string" } } } } } } } } } } } }`;
    const { evals, classifier: c } = await runDeep({
      codes: [
        `try { await task({ description: "x", subagentType: "classifier", responseSchema: ${deep} }); "accepted" } catch (e) { e.name + ": " + e.message }`,
      ],
    });
    expect(section(evals[0]!, "result")).toBe(
      "RangeError: task: responseSchema nests schemas 6 levels deep; the depth limit is 5",
    );
    expect(c.started).toEqual([]);
  });

  it("task is a frozen, non-configurable global that guest code cannot replace, delete or wrap", async () => {
    const { evals } = await runDeep({
      codes: [
        `const d = Object.getOwnPropertyDescriptor(globalThis, "task");
        let redefine = "allowed";
        try { Object.defineProperty(globalThis, "task", { value: () => "fake" }); } catch (e) { redefine = e.name; }
        task = () => "fake"; delete globalThis.task; try { task.call = null; } catch {}
        ({ writable: d.writable, configurable: d.configurable, frozen: Object.isFrozen(task), redefine, same: task === d.value,
           hidden: Object.getOwnPropertyNames(globalThis).filter((n) => n.startsWith("__")) })`,
        `typeof (await task({ description: "Classify file-1 ", subagentType: "classifier" }))`,
      ],
    });
    expect(section(evals[0]!, "result")).toBe(
      "{\n  writable: false,\n  configurable: false,\n  frozen: true,\n  redefine: 'TypeError',\n  same: true,\n  hidden: []\n}",
    );
    expect(section(evals[1]!, "result")).toBe("string");
  });

  it("invalid requests reject before any subagent runs, naming the valid keys and types", async () => {
    const { evals, classifier: c } = await runDeep({
      codes: [
        `const attempts = [
          { description: "x", subagentType: "nope" },
          { description: "x", subagentType: "classifier", priority: 1 },
          { description: "", subagentType: "classifier" },
          { description: "x" },
        ];
        const out = [];
        for (const a of attempts) { try { await task(a); out.push("ok"); } catch (e) { out.push(e.message); } }
        out.join("\\n")`,
      ],
    });
    const lines = section(evals[0]!, "result")!.split("\n");
    expect(lines[0]).toBe(
      'task: unknown subagentType "nope"; valid types: "general-purpose", "classifier", "verifier"',
    );
    expect(lines[1]).toBe(
      'task: unknown key "priority"; valid keys: description, subagentType, subagent_type, label, responseSchema, response_schema',
    );
    expect(lines[2]).toBe('task: description must be a non-empty string, got ""');
    expect(lines[3]).toContain("task: subagentType must be a non-empty string");
    expect(c.started).toEqual([]);
  });

  it("a failing subagent rejects with an Error naming its type; Promise.allSettled keeps the others", async () => {
    const { evals } = await runDeep({
      codes: [
        `const rs = await Promise.allSettled([1, 2, 3].map((i) => task({ description: "Classify file-" + i + " ", subagentType: "classifier" })));
        rs.map((r) => r.status === "fulfilled" ? "ok" : r.reason instanceof Error ? r.reason.name + ": " + r.reason.message : "not an Error").join(" | ")`,
      ],
      classifier: { failWhen: (t) => (t.includes("file-2 ") ? "model overloaded" : undefined) },
    });
    expect(section(evals[0]!, "result")).toBe(
      'ok | SubagentError: Subagent "classifier" failed: model overloaded | ok',
    );
  });

  it("a runnable-backed subagent rejects a responseSchema clearly, and still answers without one", async () => {
    const { createAgent } = await import("langchain");
    const compiled = createAgent({ model: new FakeSubagentModel({ answer: () => "compiled answer" }), tools: [] });
    const { evals } = await runDeep({
      codes: [
        `let withSchema;
        try { withSchema = await task({ description: "d", subagentType: "compiled", responseSchema: { type: "object", properties: { a: { type: "string" } } } }); } catch (e) { withSchema = e.message; }
        ({ withSchema, without: await task({ description: "d", subagentType: "compiled" }) })`,
      ],
      subagents: [{ name: "compiled", description: "A prebuilt agent.", runnable: compiled }],
    });
    const result = section(evals[0]!, "result")!;
    expect(result).toContain('Subagent "compiled" failed: responseSchema cannot be used with compiled subagent');
    expect(result).toContain("without: 'compiled answer'");
  });

  it('task() answers the subagent\'s last non-empty AI message, not "Task completed", when its final message is empty', async () => {
    const { AIMessage } = await import("@langchain/core/messages");
    // The subagent says its answer while calling a tool, then ends with an empty message.
    const subagentModel = new ScriptedChatModel([
      new AIMessage({
        content: "the real answer",
        tool_calls: [{ name: "write_todos", args: { todos: [] }, type: "tool_call" }],
      }),
      reply(""),
    ]);
    const { evals } = await runDeep({
      codes: [`await task({ description: "answer", subagentType: "terse" })`],
      subagents: [
        { name: "terse", description: "Answers tersely.", systemPrompt: "Answer.", model: subagentModel, tools: [] },
      ],
    });
    expect(subagentModel.remaining).toBe(0);
    expect(section(evals[0]!, "result")).toBe("the real answer");
  });

  it("a subagent over subagentTimeoutMs is cancelled and rejects naming the option", async () => {
    const { evals, classifier: c } = await runDeep({
      codes: [
        `try { await task({ description: "Classify file-1 ", subagentType: "classifier" }) } catch (e) { e.message }`,
      ],
      options: { subagentTimeoutMs: 200 },
      classifier: { delayMs: 10_000 },
    });
    expect(section(evals[0]!, "result")).toBe(
      'Subagent "classifier" failed: did not finish within 200 ms (subagentTimeoutMs)',
    );
    await new Promise((r) => setTimeout(r, 50));
    expect({ started: c.started.length, aborted: c.aborted.length, completed: c.completed.length }).toEqual({
      started: 1,
      aborted: 1,
      completed: 0,
    });
  });

  it("subagent start and complete/error events reach LangGraph's custom stream with label, type and duration", async () => {
    const custom: unknown[] = [];
    await runDeep({
      codes: [
        `await Promise.allSettled([task({ description: "Classify file-1 ", subagentType: "classifier", label: "one" }), task({ description: "Classify file-2 ", subagentType: "classifier", label: "two" })])`,
      ],
      classifier: { delayMs: 30, failWhen: (t) => (t.includes("file-2 ") ? "broken" : undefined) },
      custom,
    });
    const events = custom.filter((e): e is Record<string, unknown> => (e as { event?: unknown }).event === "subagent");
    const summary = events.map((e) => `${String(e.label)}:${String(e.phase)}`).sort();
    expect(summary).toEqual(["one:complete", "one:start", "two:error", "two:start"]);
    for (const e of events) {
      expect(e).toMatchObject({ source: "code_interpreter", subagentType: "classifier" });
      expect(typeof e.evalCallId).toBe("string");
      if (e.phase !== "start") expect(e.durationMs).toBeGreaterThanOrEqual(25);
    }
    expect(events.find((e) => e.phase === "error")?.error).toBe('Subagent "classifier" failed: broken');
  });

  it("a request without a label is shown by its description, cut to 120 characters", async () => {
    const custom: unknown[] = [];
    const description = `Classify file-1 ${"and explain at length ".repeat(20)}`;
    await runDeep({
      codes: [`await task({ description: ${JSON.stringify(description)}, subagentType: "classifier" })`],
      custom,
    });
    const start = custom.find((e) => (e as { phase?: unknown }).phase === "start") as { label?: string } | undefined;
    expect(start?.label).toBe(description.slice(0, 120));
  });

  it("subagents: false installs no task global and leaves the task section out of the prompt", async () => {
    const { evals, model } = await runDeep({ codes: [`typeof task`], options: { subagents: false } });
    expect(section(evals[0]!, "result")).toBe("undefined");
    expect(model.calls[0]!.systemPrompt).not.toContain("Dispatching subagents");
  });

  it("an eval stopped by its execution time limit cancels its running subagents", async () => {
    const { evals, classifier: c } = await runDeep({
      codes: [
        `task({ description: "Classify file-1 ", subagentType: "classifier" });
        await task({ description: "Classify file-0 ", subagentType: "classifier" });
        for (;;) {}`,
      ],
      options: { executionTimeoutMs: 300 },
      classifier: { delayMs: (t) => (t.includes("file-0 ") ? 50 : 20_000) },
    });
    expect(section(evals[0]!, "error")).toMatch(/^TimeoutError/);
    await new Promise((r) => setTimeout(r, 50));
    expect(c.aborted).toEqual(["Classify file-1 "]);
  });

  it("disposing the middleware mid-eval cancels the eval's running subagents", async () => {
    const run = startDeep({
      codes: [
        `await Promise.all([1, 2].map((i) => task({ description: "Classify file-" + i + " ", subagentType: "classifier" })))`,
      ],
      classifier: { delayMs: 20_000 },
    });
    await run.classifier.whenStarted(2);
    run.interpreter.dispose();
    await run.done.catch(() => undefined);
    await new Promise((r) => setTimeout(r, 50));
    expect(run.classifier.aborted.sort()).toEqual(["Classify file-1 ", "Classify file-2 "]);
    expect(run.classifier.completed).toEqual([]);
  });
});
