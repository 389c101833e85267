// One agent run in its own process, on a shared checkpointer (and store): what a restarted server
// or another replica does. Usage: node persistence-process.mjs <backend> <location> <thread id> <run id> <code>
//   backend "sqlite":        SqliteSaver in <location>, SqliteStore in <location>.store
//   backend "sqlite-inline": SqliteSaver in <location>, no store (state chunks kept in the checkpointer)
//   backend "postgres":      PostgresSaver and PostgresStore on the connection URL <location>
//   backend "postgres-inline": PostgresSaver on <location>, no store
// Prints the eval's ToolMessage text as JSON on stdout. Imports the compiled package (dist/).
import { createAgent } from "langchain";
import { HumanMessage } from "@langchain/core/messages";
import { createCodeInterpreterMiddleware } from "../../../dist/langchain/index.js";
import { ScriptedChatModel, callTool, reply } from "../../../dist/langchain/testing/scripted-model.js";

const [backend, location, threadId, runId, code] = process.argv.slice(2);

async function open() {
  if (backend.startsWith("postgres")) {
    const { PostgresSaver } = await import("@langchain/langgraph-checkpoint-postgres");
    const { PostgresStore } = await import("@langchain/langgraph-checkpoint-postgres/store");
    const checkpointer = PostgresSaver.fromConnString(location);
    await checkpointer.setup();
    if (backend === "postgres-inline") return { checkpointer, store: undefined, close: async () => checkpointer.end() };
    const store = PostgresStore.fromConnString(location);
    await store.setup();
    return {
      checkpointer,
      store,
      close: async () => {
        await checkpointer.end();
        await store.stop();
      },
    };
  }
  const { SqliteSaver } = await import("@langchain/langgraph-checkpoint-sqlite");
  const checkpointer = SqliteSaver.fromConnString(location);
  if (backend === "sqlite-inline") return { checkpointer, store: undefined, close: async () => {} };
  const { SqliteStore } = await import("../../../dist/langchain/sqlite-store.js");
  const store = new SqliteStore(`${location}.store`);
  return { checkpointer, store, close: async () => store.close() };
}

const step = callTool("eval", { code }, `call-${runId}`);
step.id = `eval-${runId}`;
const done = reply("done");
done.id = `reply-${runId}`;
const { checkpointer, store, close } = await open();
const interpreter = createCodeInterpreterMiddleware({ snapshotSigningKey: process.env.SNAPSHOT_KEY });
const agent = createAgent({
  model: new ScriptedChatModel([step, done]),
  tools: [],
  middleware: [interpreter],
  checkpointer,
  store,
});
const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: threadId } });
const tool = result.messages.filter((m) => m.getType() === "tool").at(-1);
process.stdout.write(JSON.stringify(tool.content));
interpreter.dispose();
await close();
