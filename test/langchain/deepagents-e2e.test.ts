import { describe, expect, it } from "vitest";
import { createDeepAgent } from "deepagents";
import { HumanMessage, ToolMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { Command } from "@langchain/langgraph";
import { z } from "zod";
import type { CodeInterpreterMiddlewareOptions } from "../../src/langchain/index.js";
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

async function runDeepAgent(
  codes: readonly string[],
  options: CodeInterpreterMiddlewareOptions,
  extra: { tools?: unknown[]; callbacks?: ToolRunRecorder[] } = {},
) {
  const interpreter = trackedMiddleware(options);
  const model = new ScriptedChatModel([...codes.map((code) => callTool("eval", { code })), reply("done")]);
  const agent = createDeepAgent({ model, tools: (extra.tools ?? []) as never[], middleware: [interpreter] });
  const result = await agent.invoke(
    { messages: [new HumanMessage("go")] },
    { configurable: { thread_id: `deep-${Math.random()}` }, callbacks: extra.callbacks ?? [] },
  );
  const messages = result.messages as BaseMessage[];
  return {
    messages,
    evals: toolMessages(messages),
    model,
    state: result as unknown as { files?: Record<string, unknown> },
  };
}

describe("createDeepAgent with the code interpreter", () => {
  it("fans out three PTC searches in one eval; only the final value reaches the messages, and searches are child runs", async () => {
    const { webSearch, calls } = fakeWebSearch("DEEP-SEARCH-BODY");
    const recorder = new ToolRunRecorder();
    const { messages, evals } = await runDeepAgent(
      [
        `const r = await Promise.all(["retrieval","memory","evaluation"].map(t => tools.webSearch({query: t})));\nr.map(x => x.title).join(" / ")`,
      ],
      { ptc: ["web_search"] },
      { tools: [webSearch], callbacks: [recorder] },
    );
    expect(section(evals[0]!, "result")).toBe("About retrieval / About memory / About evaluation");
    for (const message of messages) expect(contentText(message)).not.toContain("DEEP-SEARCH-BODY");
    expect(calls).toHaveLength(3);
    for (const call of calls) expect(call.handlers).toContain("tool-run-recorder");
    const evalRun = recorder.runs.find((r) => r.name === "eval");
    const searches = recorder.runs.filter((r) => r.name === "web_search");
    expect(searches).toHaveLength(3);
    for (const s of searches) expect(s.parentRunId).toBe(evalRun?.runId);
  });

  it('"safe" exposes the read-only file tools of deepagents, and the prompt documents them', async () => {
    const { evals, model } = await runDeepAgent([`Object.getOwnPropertyNames(tools).sort().join(",")`], {
      ptc: "safe",
    });
    expect(section(evals[0]!, "result")).toBe("glob,grep,ls,readFile,read_file");
    expect(model.calls[0]!.systemPrompt).toContain("readFile(");
  });

  it("a PTC write_file's Command updates graph state; its ToolMessage stays out of the messages; a later read sees the file", async () => {
    const { messages, evals, state } = await runDeepAgent(
      [
        `await tools.writeFile({ file_path: "/notes.txt", content: "hello from code" });\nconst text = await tools.readFile({ file_path: "/notes.txt" });\ntypeof text === "string" && text.includes("hello from code")`,
      ],
      { ptc: ["safe", "write_file"] },
    );
    expect(section(evals[0]!, "result")).toBe("true");
    expect(Object.keys(state.files ?? {})).toContain("/notes.txt");
    expect(toolMessages(messages).map((m) => (m as { name?: string }).name)).toEqual(["eval"]);
  });

  it("a Command inside a list returned by a tool gives its message's content and applies its state updates", async () => {
    const save = tool(
      async ({ path }: { path: string }, config) => {
        const now = new Date(0).toISOString();
        const toolCallId = (config as { toolCallId?: string }).toolCallId ?? "";
        return [
          new Command({
            update: {
              files: { [path]: { content: "saved", mimeType: "text/plain", created_at: now, modified_at: now } },
              messages: [new ToolMessage({ content: `saved ${path}`, tool_call_id: toolCallId })],
            },
          }),
        ];
      },
      { name: "save_note", description: "saves a note", schema: z.object({ path: z.string() }) },
    );
    const { evals, state } = await runDeepAgent(
      [`const r = await tools.saveNote({ path: "/note.txt" }); [typeof r, r]`],
      { ptc: [save] },
    );
    expect(section(evals[0]!, "result")).toBe("[ 'string', 'saved /note.txt' ]");
    expect(Object.keys(state.files ?? {})).toContain("/note.txt");
  });
});
