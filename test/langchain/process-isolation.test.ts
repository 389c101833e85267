/**
 * The middleware's `isolation: "process"`: each session's interpreter lives in a helper process of
 * its partition, and a lost helper is handled like a failed restore: the model reads one line, and
 * in mode "thread" the next eval starts from the session's last state.
 */
import { describe, expect, it } from "vitest";
import { createAgent } from "langchain";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { type CodeInterpreterMiddleware, createCodeInterpreterMiddleware } from "../../src/langchain/index.js";
import { createRemoteHandle } from "../../src/process-tier/pool.js";
import { validateOptions } from "../../src/validate.js";
import { ScriptedChatModel, callTool, contentText, reply, toolMessages } from "./support/agent.js";
import { trackedMiddleware } from "./support/tracked-middleware.js";

let runs = 0;

async function turn(
  interpreter: CodeInterpreterMiddleware,
  checkpointer: MemorySaver,
  codes: string[],
  thread = "lost",
) {
  const run = ++runs;
  const steps = [...codes.map((code, i) => callTool("eval", { code }, `call-${run}-${i}`)), reply("done")];
  steps.forEach((step, i) => {
    step.id = `run-${run}-${i}`;
  });
  const agent = createAgent({
    model: new ScriptedChatModel(steps),
    tools: [],
    middleware: [interpreter],
    checkpointer,
  });
  const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: thread } });
  const all = toolMessages(result.messages as BaseMessage[]);
  return all.slice(all.length - codes.length).map(contentText);
}

describe.skipIf(process.env.QJSN_SANITIZED === "1")('createCodeInterpreterMiddleware({ isolation: "process" })', () => {
  it("a session whose helper died comes back from its last state on the next eval", async () => {
    const partition = "agent-lost";
    const interpreter = trackedMiddleware({ isolation: "process", partition });
    const saver = new MemorySaver();
    const [first] = await turn(interpreter, saver, ["var notes = ['a']; notes.push('b'); notes.length"]);
    expect(first).toContain("2");
    // The session's helper is the one of its partition: kill it between turns.
    const probe = createRemoteHandle(validateOptions({ isolation: "process", partition }), () => undefined);
    process.kill(probe.processId, "SIGKILL");
    probe.dispose();
    const [lost, recovered] = await turn(interpreter, saver, ["notes.join('+')", "notes.join('+')"]);
    expect(lost).toContain("InterpreterLostError");
    expect(recovered).toContain("a+b");
  });

  it("isolation as a function of the run: each thread's session gets the tier it returns, chosen once per session", async () => {
    const partition = "agent-chosen";
    const asked: string[] = [];
    const interpreter = trackedMiddleware({
      partition,
      isolation: (threadId, config) => {
        asked.push(`${threadId}=${String(config.configurable?.thread_id)}`);
        return threadId === "helper-thread" ? "process" : "in-process";
      },
    });
    const saver = new MemorySaver();
    const code = ["var notes = ['a']; notes.push('b'); notes.length", "notes.length"];
    expect(await turn(interpreter, saver, code, "helper-thread")).toEqual([
      expect.stringContaining("2"),
      expect.stringContaining("2"),
    ]);
    expect(await turn(interpreter, saver, code, "local-thread")).toEqual([
      expect.stringContaining("2"),
      expect.stringContaining("2"),
    ]);
    expect(asked).toEqual(["helper-thread=helper-thread", "local-thread=local-thread"]);
    // Only the session that chose "process" lives in the partition's helper: killing it loses that one.
    const probe = createRemoteHandle(validateOptions({ isolation: "process", partition }), () => undefined);
    process.kill(probe.processId, "SIGKILL");
    probe.dispose();
    const [lost] = await turn(interpreter, saver, ["notes.join('+')"], "helper-thread");
    expect(lost).toContain("InterpreterLostError");
    const [kept] = await turn(interpreter, saver, ["notes.join('+')"], "local-thread");
    expect(kept).toContain("a+b");
    expect(kept).not.toContain("InterpreterLostError");
    expect(asked).toEqual(["helper-thread=helper-thread", "local-thread=local-thread"]);
  });

  it("isolation is a tier or a function: anything else is refused when the middleware is created", () => {
    expect(() => createCodeInterpreterMiddleware({ isolation: "remote" as never })).toThrow(/isolation/);
    expect(() => createCodeInterpreterMiddleware({ isolation: 42 as never })).toThrow(/isolation/);
  });

  it("an isolation function that returns no tier fails the eval with a typed error", async () => {
    const interpreter = trackedMiddleware({ isolation: () => "elsewhere" as never });
    const [out] = await turn(interpreter, new MemorySaver(), ["1 + 1"], "bad-tier");
    expect(out).toContain('must return "in-process" or "process"');
  });
});
