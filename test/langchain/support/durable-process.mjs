// One agent process of the durable-eval scenarios, on a shared checkpointer (SQLite file, or the
// Postgres URL). Usage: node durable-process.mjs <backend sqlite|postgres> <location> <thread id> <log file> <role> [code]
//   role "run":    starts the thread with one eval of <code> and runs it to its end
//   role "resume": continues the thread (agent.invoke(null, config)), as after a crash or a drain
// Tool `step({ n })` appends { n, id } to the log file (id: the call's config.toolCallId). With HOLD
// set to a list of numbers ("8" or "4,5,6,7,8"), those calls in this process log, tell the parent
// over IPC ({ started: n }) and never return: the parent kills the process then (SIGKILL), or sends
// SIGTERM when DRAIN_MS is set (the process drains with that deadline and exits; HOLD calls then
// return after HOLD_MS instead of never). With LAG set, the checkpoint the eval runs on is stored
// late, as LangGraph's default ("async") durability may store it (issue 31): its put, and those after
// it, wait until a read misses it after a call from code started (the put lands while the reader
// waits), never for a time. Prints the last ToolMessage's text as JSON on stdout.
import { appendFileSync } from "node:fs";
import { createAgent, tool } from "langchain";
import { HumanMessage } from "@langchain/core/messages";
import { z } from "zod";
import { createCodeInterpreterMiddleware } from "../../../dist/langchain/index.js";
import { ScriptedChatModel, callTool, reply } from "../../../dist/langchain/testing/scripted-model.js";

const [backend, location, threadId, logFile, role, code] = process.argv.slice(2);
const hold = new Set(
  (process.env.HOLD ?? "")
    .split(",")
    .filter((x) => x !== "")
    .map(Number),
);
const drainMs = process.env.DRAIN_MS === undefined ? undefined : Number(process.env.DRAIN_MS);

async function open() {
  if (backend === "postgres") {
    const { PostgresSaver } = await import("@langchain/langgraph-checkpoint-postgres");
    const checkpointer = PostgresSaver.fromConnString(location);
    await checkpointer.setup();
    return checkpointer;
  }
  const { SqliteSaver } = await import("@langchain/langgraph-checkpoint-sqlite");
  return SqliteSaver.fromConnString(location);
}

let called = false;

/** `checkpointer`, its checkpoints from the model's call of the eval on stored late (see LAG). */
function lagging(checkpointer) {
  let armed = true;
  let held;
  const { put, putWrites, getTuple } = checkpointer;
  const asksForEval = (value) =>
    (Array.isArray(value) ? value : [value]).some((m) => (m?.tool_calls ?? []).some((c) => c.name === "eval"));
  const release = () => {
    for (const one of held?.splice(0) ?? []) one();
    held = undefined;
  };
  checkpointer.putWrites = function (config, writes, ...rest) {
    if (armed && writes.some(([channel, value]) => channel === "messages" && asksForEval(value))) {
      armed = false;
      held = [];
    }
    return putWrites.call(this, config, writes, ...rest);
  };
  checkpointer.put = function (...args) {
    if (held === undefined) return put.apply(this, args);
    return new Promise((resolve, reject) => held.push(() => put.apply(this, args).then(resolve, reject)));
  };
  checkpointer.getTuple = async function (config) {
    const tuple = await getTuple.call(this, config);
    if (tuple === undefined && called) release();
    return tuple;
  };
  return checkpointer;
}

const step = tool(
  async ({ n }, config) => {
    called = true;
    appendFileSync(logFile, `${JSON.stringify({ n, id: config.toolCallId, pid: process.pid })}\n`);
    if (hold.has(n)) {
      process.send?.({ started: n });
      await new Promise((resolve) => drainMs !== undefined && setTimeout(resolve, Number(process.env.HOLD_MS)));
    }
    return { line: `step ${n} done` };
  },
  { name: "step", description: "One step.", schema: z.object({ n: z.number() }) },
);

const interpreter = createCodeInterpreterMiddleware({
  ptc: [step],
  snapshotSigningKey: "a-signing-key-of-at-least-16-bytes",
  // A fixed clock and seed: a run never interrupted gives the same text as a resumed one.
  clock: { now: () => 1_700_000_000_000 },
  randomSeed: 7,
});
if (drainMs !== undefined)
  process.on("SIGTERM", () => {
    void interpreter.drain({ deadlineMs: drainMs }).then(() => process.exit(0));
  });
const evalCall = callTool("eval", { code: code ?? "" }, "eval-1");
evalCall.id = "ai-eval";
const done = reply("done");
done.id = "ai-done";
const checkpointer = process.env.LAG === undefined ? await open() : lagging(await open());
const agent = createAgent({
  model: new ScriptedChatModel(role === "run" ? [evalCall, done] : [done]),
  tools: [step],
  middleware: [interpreter],
  checkpointer,
});
const config = { configurable: { thread_id: threadId } };
const result = await agent.invoke(role === "run" ? { messages: [new HumanMessage("go")] } : null, config);
const last = result.messages.filter((m) => m.getType() === "tool").at(-1);
process.stdout.write(JSON.stringify(last?.content ?? null));
interpreter.dispose();
await checkpointer.end?.();
process.exit(0);
