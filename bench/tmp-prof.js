import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import { createAgent, tool } from "langchain";
import { HumanMessage } from "@langchain/core/messages";
import { z } from "zod";
import { createCodeInterpreterMiddleware } from "../dist/langchain/index.js";
import { ScriptedChatModel, callTool, reply } from "../dist/langchain/testing/scripted-model.js";
const saver = SqliteSaver.fromConnString("/tmp/dur/p3.sqlite");
const durable = process.argv[2] === "on";
for (let i = 0; i < 5; i++) {
  const step = tool(async () => "x", { name: "step", description: "s", schema: z.object({ n: z.number() }) });
  const interpreter = createCodeInterpreterMiddleware({ ptc: [step], maxPtcCalls: null, durableEvals: durable });
  const code = `for (let n = 1; n <= 300; n++) await tools.step({ n });`;
  const agent = createAgent({ model: new ScriptedChatModel([callTool("eval", { code }, "eval-1"), reply("done")]), tools: [step], middleware: [interpreter], checkpointer: saver });
  await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: "t" + Math.random() } });
}
