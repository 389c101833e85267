/**
 * Test support for durable evals: an agent whose eval calls `tools.step({ n })`, each run logged
 * with its `toolCallId`, on a MemorySaver a test can read and tamper with; a run stopped by a drain.
 */
import { createAgent } from "langchain";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { tool } from "@langchain/core/tools";
import type { MemorySaver } from "@langchain/langgraph";
import { z } from "zod";
import type { CodeInterpreterMiddleware, CodeInterpreterMiddlewareOptions } from "../../../src/langchain/index.js";
import { ScriptedChatModel, callTool, contentText, reply, toolMessages } from "./agent.js";
import { trackedMiddleware } from "./tracked-middleware.js";

/** MemorySaver's pending writes: `[taskId, channel, value, path]` by outer and inner key. */
export type Writes = Record<string, Record<string, [string, string, unknown, string]>>;

/** Every pending write of `saver`. */
export function writesOf(saver: MemorySaver): [string, string, unknown, string][] {
  return Object.values((saver as unknown as { writes: Writes }).writes).flatMap((byInner) => Object.values(byInner));
}

export interface Made {
  n: number;
  id: string | undefined;
}

/**
 * An agent whose one eval runs `code` with `tools.step({ n })` (each run logged in `made`, with its
 * `toolCallId`; `onStep` sees it first); `resume` builds the agent of a process that continues the
 * thread (its model only replies).
 */
export function durableAgent(
  saver: MemorySaver,
  made: Made[],
  code: string,
  options: CodeInterpreterMiddlewareOptions & {
    resume?: boolean;
    onStep?: (n: number) => void;
    /** A middleware to use instead of a new one. */
    middleware?: CodeInterpreterMiddleware;
  } = {},
) {
  const { resume, onStep, middleware, ...rest } = options;
  const step = tool(
    async ({ n, size }: { n: number; size?: number }, config) => {
      made.push({ n, id: (config as { toolCallId?: string }).toolCallId });
      onStep?.(n);
      return `step ${n} ${"x".repeat(size ?? 0)}`;
    },
    { name: "step", description: "One step.", schema: z.object({ n: z.number(), size: z.number().optional() }) },
  );
  // A middleware passed in was made (and is disposed) by the test's own first agent.
  const interpreter =
    middleware ?? trackedMiddleware({ ptc: [step], snapshotSigningKey: "a-signing-key-of-at-least-16-bytes", ...rest });
  const model = new ScriptedChatModel(
    resume === true ? [reply("done")] : [callTool("eval", { code }, "eval-1"), reply("done")],
  );
  const agent = createAgent({ model, tools: [step], middleware: [interpreter], checkpointer: saver });
  return { agent, interpreter };
}

export function evalText(result: Record<string, unknown>): string {
  return contentText(toolMessages(result["messages"] as BaseMessage[]).at(-1)!);
}

export const FIVE_STEPS = `
const out = [];
for (let n = 1; n <= 5; n++) out.push(await tools.step({ n }));
out.join(", ")`;

/**
 * Runs FIVE_STEPS until a drain (started in call `drainAt`, deadline 0) stopped it at its next
 * call; resolves once the drain did (the eval never settles in that middleware, as in a process
 * that exits).
 */
export async function drainedRun(saver: MemorySaver, made: Made[], thread: string, drainAt: number) {
  let drained: Promise<{ stopped: number }> | undefined;
  const first = durableAgent(saver, made, FIVE_STEPS, {
    onStep: (n) => {
      if (n === drainAt) drained = first.interpreter.drain({ deadlineMs: 0 });
    },
  });
  void first.agent
    .invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: thread } })
    .catch(() => {});
  while (drained === undefined) await new Promise((resolve) => setTimeout(resolve, 5));
  return { first, drained: await drained };
}
