/**
 * Test support: fake tools with observable calls, a callback recorder, and helpers that read the
 * messages of an agent run.
 */
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import type { BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import { z } from "zod";

export { ScriptedChatModel, callTool, reply } from "../../../src/langchain/testing/scripted-model.js";

/** One tool run as the callback system saw it. */
export interface RecordedToolRun {
  name: string;
  runId: string;
  parentRunId: string | undefined;
  toolCallId: string | undefined;
}

/** Records every tool start, so tests can check PTC calls are child runs of the eval call. */
export class ToolRunRecorder extends BaseCallbackHandler {
  name = "tool-run-recorder";
  readonly runs: RecordedToolRun[] = [];

  override handleToolStart(
    tool: { id?: string[]; name?: string },
    _input: string,
    runId: string,
    parentRunId?: string,
    _tags?: string[],
    _metadata?: Record<string, unknown>,
    runName?: string,
    toolCallId?: string,
  ): void {
    this.runs.push({ name: runName ?? tool.name ?? "?", runId, parentRunId, toolCallId });
  }
}

/** A fake `web_search` returning structured results with a marker that must never reach the messages. */
export function fakeWebSearch(marker: string) {
  const calls: { query: string; handlers: string[] }[] = [];
  const webSearch = tool(
    async ({ query }: { query: string }, config) => {
      const handlers = (config.callbacks as { handlers?: { name: string }[] } | undefined)?.handlers ?? [];
      calls.push({ query, handlers: handlers.map((h) => h.name) });
      return { title: `About ${query}`, body: `${marker}:${query}`, score: query.length };
    },
    {
      name: "web_search",
      description: "Searches the web and returns the best hit.",
      schema: z.object({ query: z.string().describe("What to search for") }),
    },
  );
  return { webSearch, calls };
}

/** Text of a message's content, whatever its shape. */
export function contentText(message: BaseMessage): string {
  return typeof message.content === "string" ? message.content : JSON.stringify(message.content);
}

/** The ToolMessages of a run, in order. */
export function toolMessages(messages: readonly BaseMessage[]): BaseMessage[] {
  return messages.filter((m) => m.getType() === "tool");
}

/** The `<result>` text of an eval ToolMessage (throws when the eval failed), or its `<error>` text. */
export function section(
  message: BaseMessage,
  name: "result" | "error" | "console" | "hint" | "status",
): string | undefined {
  const match = new RegExp(`<${name}>\\n?([\\s\\S]*?)\\n?</${name}>`).exec(contentText(message));
  return match?.[1];
}
