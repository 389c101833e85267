// One agent invocation in its own process, on a SQLite checkpointer file: the first run of a
// thread, or a resume with a review decision (what another replica does after a human answered).
// Usage: node approval-process.mjs <db file> <thread id> <log file> <code | resume JSON>
// Tools are given to ptc as instances: a resuming process makes no model call to learn them from.
// Tool runs are appended to the log file (one JSON line each), so the test sees every process's calls.
// Prints { interrupt, text } as JSON: the pending HITL request, if any, and the last eval's text.
import { appendFileSync } from "node:fs";
import { createAgent, tool } from "langchain";
import { HumanMessage } from "@langchain/core/messages";
import { Command } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { z } from "zod";
import { createCodeInterpreterMiddleware } from "../../../dist/langchain/index.js";
import { ScriptedChatModel, callTool, reply } from "../../../dist/langchain/testing/scripted-model.js";

const [dbFile, threadId, logFile, input] = process.argv.slice(2);
const log = (entry) => appendFileSync(logFile, `${JSON.stringify(entry)}\n`);
const lookup = tool(
  async ({ name }) => {
    log({ tool: "lookup", name });
    return { email: `${name}@example.com` };
  },
  {
    name: "lookup",
    description: "Finds a person's email address.",
    schema: z.object({ name: z.string() }),
  },
);
const sendEmail = tool(
  async ({ to, body }) => {
    log({ tool: "send_email", to, body });
    return `sent to ${to}`;
  },
  {
    name: "send_email",
    description: "Sends an email.",
    schema: z.object({ to: z.string(), body: z.string() }),
  },
);

const resume = input.startsWith("{") ? JSON.parse(input) : undefined;
// The model's script is the same in every process: one eval, then a reply.
const step = callTool("eval", { code: resume === undefined ? input : "" }, "eval-1");
step.id = "ai-eval";
const done = reply("done");
done.id = "ai-done";
const interpreter = createCodeInterpreterMiddleware({
  ptc: [lookup, sendEmail],
  interruptOn: { send_email: true },
  snapshotSigningKey: process.env.SNAPSHOT_KEY,
});
const model = new ScriptedChatModel(resume === undefined ? [step, done] : [done]);
const agent = createAgent({
  model,
  tools: [lookup, sendEmail],
  middleware: [interpreter],
  checkpointer: SqliteSaver.fromConnString(dbFile),
});
const config = { configurable: { thread_id: threadId } };
const result = await agent.invoke(
  resume === undefined ? { messages: [new HumanMessage("go")] } : new Command({ resume }),
  config,
);
const tool_ = result.messages.filter((m) => m.getType() === "tool").at(-1);
process.stdout.write(
  JSON.stringify({ interrupt: result.__interrupt__?.[0]?.value ?? null, text: tool_?.content ?? null }),
);
interpreter.dispose();
