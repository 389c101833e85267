/**
 * The eval tool: queue on the thread's session, transform the model's code, run it in the
 * session's sandbox with the `tools` namespace bound to this call, format the report, and hand
 * back text (or a `Command` when PTC calls asked for graph-state updates).
 */
import { tool, type DynamicStructuredTool } from "@langchain/core/tools";
import { ToolMessage } from "@langchain/core/messages";
import { Sandbox } from "../sandbox.js";
import type { HostCallContext, SandboxOptions } from "../types.js";
import { formatEvalOutput } from "./format.js";
import type { ResolvedOptions } from "./options.js";
import { EVAL_INPUT_DESCRIPTIONS } from "./prompts.js";
import { PtcEvalContext, type EvalRunConfig, type PtcResolver, type PtcToolView, type StateUpdate } from "./ptc.js";
import { SessionRegistry, type InterpreterSession } from "./sessions.js";
import type { TaskDispatcher } from "./task.js";
import { transformCode } from "./transform.js";

/** Arguments of the eval tool. */
export interface EvalToolInput {
  code: string;
  reset?: boolean;
}

/** A session's sandbox and the `tools.*` functions already defined in it. */
export interface LiveSandbox {
  sandbox: Sandbox;
  defined: Set<string>;
}

/** What a session keeps besides its sandbox. */
export interface SessionState {
  /** Tools offered in the thread's latest model turn. */
  view: PtcToolView | undefined;
  /** PTC context of the eval running now, if any: host functions route calls through it. */
  active: { context: PtcEvalContext; view: PtcToolView } | undefined;
}

export type Interpreter = SessionRegistry<LiveSandbox, SessionState>;
type Session = InterpreterSession<LiveSandbox, SessionState>;

const SCRIPT_FILENAME = "<eval>";
const DEFAULT_SESSION_KEY = "default";

/** The session key of a run: its LangGraph thread, or the middleware instance's own session. */
export function sessionKeyOf(threadId: unknown): string {
  return typeof threadId === "string" && threadId !== "" ? `thread:${threadId}` : DEFAULT_SESSION_KEY;
}

function sandboxOptions(options: ResolvedOptions): SandboxOptions {
  const out: SandboxOptions = {
    memoryLimitBytes: options.memoryLimitBytes,
    executionTimeoutMs: options.executionTimeoutMs,
    wallTimeoutMs: options.wallTimeoutMs,
    captureConsole: options.captureConsole,
    clock: options.clock,
  };
  if (options.maxStackSizeBytes !== undefined) out.maxStackSizeBytes = options.maxStackSizeBytes;
  if (options.randomSeed !== undefined) out.randomSeed = options.randomSeed;
  return out;
}

/** Creates the session registry of one middleware instance. */
export function createInterpreter(options: ResolvedOptions): Interpreter {
  const config = sandboxOptions(options);
  return new SessionRegistry<LiveSandbox, SessionState>({
    maxLiveSessions: options.maxLiveSessions,
    idleTimeoutMs: options.sessionIdleTimeoutMs,
    open: () => ({ sandbox: new Sandbox(config), defined: new Set() }),
    close: (live) => live.sandbox.dispose(),
    initState: () => ({ view: undefined, active: undefined }),
  });
}

/**
 * Defines `tools.<camelName>` for each tool of `view` not yet defined in this sandbox. Each host
 * function looks up the eval running at call time, so one definition serves every later eval.
 */
function bindTools(session: Session, live: LiveSandbox, view: PtcToolView): void {
  for (const camelName of view.byCamelName.keys()) {
    if (live.defined.has(camelName)) continue;
    live.sandbox.defineAsyncFunction(`tools.${camelName}`, (args: unknown[], { signal }: HostCallContext) => {
      const active = session.state.active;
      const target = active?.view.byCamelName.get(camelName);
      if (active === undefined || target === undefined) {
        throw new Error(`tools.${camelName} is not available in this eval`);
      }
      return active.context.call(target, args, signal);
    });
    live.defined.add(camelName);
  }
}

/** What one eval produced for the model and for the graph. */
interface EvalOutcome {
  text: string;
  /** False when the code threw or was stopped: the ToolMessage is then marked as an error. */
  ok: boolean;
  updates: readonly StateUpdate[];
}

async function evaluate(session: Session, input: EvalToolInput, config: EvalRunConfig, deps: EvalToolDeps): Promise<EvalOutcome> {
  const { options } = deps;
  if (input.reset === true) session.discard();
  const view = session.state.view ?? deps.ptc.latest;
  const context = new PtcEvalContext(config, options);
  let tasks: ReturnType<TaskDispatcher["begin"]>;
  try {
    const live = session.resource;
    bindTools(session, live, view);
    tasks = deps.task?.begin(session, live.sandbox, config, options.wallTimeoutMs);
    const transformed = transformCode(input.code);
    session.state.active = { context, view };
    const report = await live.sandbox.run(transformed.code, {
      filename: SCRIPT_FILENAME,
      unserializable: "describe",
      ...(config.signal === undefined ? {} : { signal: config.signal }),
      ...(tasks === undefined ? {} : { wallTimeoutMs: tasks.wallTimeoutMs }),
    });
    // A sandbox the engine gave up on cannot serve the next eval; start that one fresh.
    if (!report.ok && (report.error.code === "BROKEN" || report.error.code === "DISPOSED")) session.discard();
    const text = formatEvalOutput(report, {
      maxResultChars: options.maxResultChars,
      filename: SCRIPT_FILENAME,
      ...(transformed.lineMap === undefined ? {} : { lineMap: transformed.lineMap }),
    });
    return { text, ok: report.ok, updates: context.updates };
  } finally {
    tasks?.end();
    session.state.active = undefined;
    if (options.mode === "call") session.discard();
  }
}

/** What the eval tool needs from its middleware. */
export interface EvalToolDeps {
  options: ResolvedOptions;
  interpreter: Interpreter;
  ptc: PtcResolver;
  /** `task()` for subagents; absent when the middleware never installs it. */
  task?: TaskDispatcher;
}

let commandModule: Promise<typeof import("@langchain/langgraph")> | undefined;

/**
 * The eval result as the ToolNode expects it: its ToolMessage (status "error" when the code failed),
 * wrapped in a `Command` with the state updates PTC calls requested, if any. Invoked without a tool
 * call (directly, outside an agent), it is the text alone.
 */
async function toToolOutput(outcome: EvalOutcome, config: EvalRunConfig, toolName: string): Promise<unknown> {
  const toolCallId = config.toolCall?.id ?? config.toolCallId;
  if (toolCallId === undefined) return outcome.text;
  const message = new ToolMessage({ content: outcome.text, tool_call_id: toolCallId, name: toolName, status: outcome.ok ? "success" : "error" });
  if (outcome.updates.length === 0) return message;
  // Only tools that themselves return a Command get here, so @langchain/langgraph is installed.
  commandModule ??= import("@langchain/langgraph");
  const { Command } = await commandModule;
  return new Command({ update: [...outcome.updates, ["messages", [message]]] });
}

/**
 * Creates the eval tool of one middleware instance. `description` is the text for the tools known
 * at construction; the middleware refreshes it per turn once the agent's tools are known.
 */
export function createEvalTool(deps: EvalToolDeps, description: string): DynamicStructuredTool {
  const { options, interpreter } = deps;
  return tool(
    async (input: EvalToolInput, config: EvalRunConfig) => {
      const key = sessionKeyOf(config.configurable?.thread_id);
      const outcome = await interpreter.run(key, (session) => evaluate(session, input, config, deps));
      return toToolOutput(outcome, config, options.toolName);
    },
    {
      name: options.toolName,
      description,
      schema: {
        type: "object",
        properties: {
          code: { type: "string", description: EVAL_INPUT_DESCRIPTIONS.code },
          reset: { type: "boolean", description: EVAL_INPUT_DESCRIPTIONS.reset },
        },
        required: ["code"],
        additionalProperties: false,
      },
      metadata: { ls_code_input_language: "javascript" },
    },
  ) as DynamicStructuredTool;
}
