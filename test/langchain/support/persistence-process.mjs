// One agent run in its own process, on a SQLite checkpointer file: what a restarted server or
// another replica does. Usage: node persistence-process.mjs <db file> <thread id> <run id> <code>
// Prints the eval's ToolMessage text as JSON on stdout. Imports the compiled package (dist/).
import { createAgent } from "langchain";
import { HumanMessage } from "@langchain/core/messages";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { createCodeInterpreterMiddleware } from "../../../dist/langchain/index.js";
import { ScriptedChatModel, callTool, reply } from "../../../dist/langchain/testing/scripted-model.js";

const [dbFile, threadId, runId, code] = process.argv.slice(2);
const step = callTool("eval", { code }, `call-${runId}`);
step.id = `eval-${runId}`;
const done = reply("done");
done.id = `reply-${runId}`;
const interpreter = createCodeInterpreterMiddleware({ snapshotSigningKey: process.env.SNAPSHOT_KEY });
const agent = createAgent({ model: new ScriptedChatModel([step, done]), tools: [], middleware: [interpreter], checkpointer: SqliteSaver.fromConnString(dbFile) });
const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: threadId } });
const tool = result.messages.filter((m) => m.getType() === "tool").at(-1);
process.stdout.write(JSON.stringify(tool.content));
interpreter.dispose();
