/**
 * `quickjs-native/langchain`: a code interpreter for LangChain agents (`createAgent`, deepagents'
 * `createDeepAgent`), as one middleware.
 */
import { createMiddleware, type AgentMiddleware } from "langchain";
import type { ClientTool, StructuredToolInterface } from "@langchain/core/tools";
import { toJsonSchema } from "@langchain/core/utils/json_schema";
import { createEvalTool, createInterpreter, sandboxOptions, sessionKeyOf } from "./eval-tool.js";
import { resolveOptions, type CodeInterpreterMiddlewareOptions, type ResolvedOptions } from "./options.js";
import {
  renderPtcSection,
  renderSystemPrompt,
  renderTaskSection,
  renderToolDescription,
  type JSONSchema,
  type PromptInput,
} from "./prompts.js";
import {
  Persistence,
  persistenceStateSchema,
  runStorageOf,
  SNAPSHOT_STATE_KEY,
  storedSnapshotOf,
} from "./persistence.js";
import { PtcResolver, type PtcToolView } from "./ptc.js";
import { TaskDispatcher, type TaskCatalog } from "./task.js";
import { Approval } from "./approval.js";

export type {
  CodeInterpreterMiddlewareOptions,
  InterpreterMode,
  InterruptOnTools,
  IsolationChooser,
  PtcEntry,
  PtcPreset,
  RunConfigView,
  SystemPromptOption,
} from "./options.js";
export { INTERPRETER_LIMITS } from "./limits.js";
export { PTCCallBudgetExceededError } from "./ptc.js";
export { MAX_LIVE_PAUSED_EVALS } from "./approval.js";
export { ReplayDivergenceError } from "./review-answers.js";
export type { SubagentProgressEvent } from "./task.js";
export type { EvalProgressEvent } from "./activity.js";
export type { EvalOutcomeMetadata, EvalStatus, KeptOutput } from "./outcome.js";

/** The middleware, plus a way to close its sandboxes before the process exits. */
export type CodeInterpreterMiddleware = AgentMiddleware<
  typeof persistenceStateSchema,
  undefined,
  unknown,
  readonly ClientTool[]
> & {
  /**
   * For a SIGTERM handler: new evals are refused with a clear message; running evals may finish
   * until `deadlineMs`; then each is stopped at its next host call, once its calls in flight
   * settled and its journal is written (with a checkpointer), so the next process that continues
   * the thread (`agent.invoke(null, config)`) resumes it there. Resolves when that is done: exit
   * then. Evals stopped so never settle in this process.
   */
  drain(options: { deadlineMs: number }): Promise<{ stopped: number }>;
  /** Closes every live sandbox of this middleware; later evals fail. Idempotent. */
  dispose(): void;
  [Symbol.dispose](): void;
};

const schemaCache = new WeakMap<object, JSONSchema>();

function jsonSchemaOf(tool: StructuredToolInterface): JSONSchema {
  const schema: unknown = tool.schema;
  if (typeof schema !== "object" || schema === null) return { type: "object", properties: {} };
  let json = schemaCache.get(schema);
  if (json === undefined) {
    // The input side: a field with a default is optional to the caller (zod's output side requires it).
    json = toJsonSchema(tool.schema, { io: "input" }) as JSONSchema;
    schemaCache.set(schema, json);
  }
  return json;
}

/** What the prompt texts depend on, for the tools of one turn. */
function promptInput(options: ResolvedOptions, view: PtcToolView, task?: TaskCatalog): PromptInput {
  return {
    mode: options.mode,
    toolName: options.toolName,
    limits: {
      memoryLimitBytes: options.memoryLimitBytes,
      executionTimeoutMs: options.executionTimeoutMs,
      wallTimeoutMs: options.wallTimeoutMs,
      maxResultChars: options.maxResultChars,
      maxPtcCalls: options.maxPtcCalls,
    },
    captureConsole: options.captureConsole,
    keepsFullOutput: options.maxKeptOutputChars > 0,
    ptcTools: [...view.byCamelName.values()].map((t) => {
      const quota = options.ptcQuotas.get(t.name);
      return {
        name: t.name,
        camelName: t.camelName,
        description: t.tool.description,
        schema: jsonSchemaOf(t.tool),
        ...(quota === undefined ? {} : { quota }),
        ...(options.interruptOn.tools.has(t.name) ? { reviewed: true } : {}),
      };
    }),
    taskAvailable: task !== undefined,
    ...(options.interruptOn.tools.has("task") ? { taskReviewed: true } : {}),
    subagents: task?.subagents ?? [],
    subagentTimeoutMs: options.subagentTimeoutMs,
    clock: typeof options.clock === "string" ? options.clock : "host",
    randomSeeded: options.randomSeed !== undefined,
  };
}

/** This middleware's system-prompt text for a turn, or `undefined` when it adds none. */
function systemPromptText(options: ResolvedOptions, input: PromptInput): string | undefined {
  const setting = options.systemPrompt;
  switch (setting.kind) {
    case "off":
      return undefined;
    case "default":
      return renderSystemPrompt(input);
    case "append":
      return `${renderSystemPrompt(input)}\n\n${setting.text}`;
    case "replace": {
      // A custom text replaces the interpreter section only: the tools reference stays accurate.
      const sections = [setting.text];
      if (input.ptcTools.length > 0) sections.push(renderPtcSection(input));
      if (input.taskAvailable) sections.push(renderTaskSection(input));
      return sections.join("\n\n");
    }
  }
}

/**
 * Creates the code interpreter middleware: an eval tool running JavaScript/TypeScript in a
 * QuickJS sandbox per thread, optional programmatic tool calling (`tools.*` inside the code), and
 * the system-prompt section that explains both to the model. Options are validated here; a
 * mistake throws a `TypeError` naming the option.
 *
 * Calls from code to tools listed in `interruptOn` (and `task()`, with `task` listed) pause the
 * eval for human review; `subagents: false` leaves `task()` out.
 */
export function createCodeInterpreterMiddleware(
  options: CodeInterpreterMiddlewareOptions = {},
): CodeInterpreterMiddleware {
  const resolved = resolveOptions(options);
  const persistence = new Persistence(resolved, sandboxOptions(resolved));
  const interpreter = createInterpreter(resolved, persistence);
  const ptc = new PtcResolver(resolved.ptc, resolved.toolName);
  const task = new TaskDispatcher(resolved);
  const initial = promptInput(resolved, ptc.latest);
  const approval = new Approval(resolved);
  const evalTool = createEvalTool(
    { options: resolved, interpreter, persistence, ptc, task, approval },
    renderToolDescription(initial),
  );
  let cached: { view: PtcToolView; task: TaskCatalog | undefined; prompt: string | undefined } | undefined;

  const middleware = createMiddleware({
    name: "CodeInterpreterMiddleware",
    stateSchema: persistenceStateSchema,
    tools: [evalTool],
    beforeAgent: async (state, runtime) => {
      const key = sessionKeyOf(runtime.configurable?.thread_id);
      // "turn": each agent run starts fresh, even when the previous run never reached afterAgent.
      if (resolved.mode === "turn") await interpreter.discard(key);
      if (!persistence.storesThread) return undefined;
      const stored = storedSnapshotOf(state);
      if (stored === undefined && interpreter.get(key) === undefined) return undefined;
      // Restoring is lazy (on the thread's next eval): a run that never evals pays at most a store read.
      await interpreter.run(
        key,
        async (session) => {
          if (!session.state.persistence.prepare(stored, session.isOpen)) return;
          session.discard();
          // Not awaited: the store read overlaps the model call; the first eval waits for it.
          void session.state.persistence.load(runStorageOf(runtime.store, runtime.configurable), session.key);
        },
        runtime,
      );
      return undefined;
    },
    afterAgent: async (state, runtime) => {
      const key = sessionKeyOf(runtime.configurable?.thread_id);
      if (resolved.mode === "turn") await interpreter.discard(key);
      if (!persistence.storesThread || interpreter.get(key) === undefined) return undefined;
      const update = await interpreter.run(key, async (session) => {
        // A run that ended on a rolled-back eval still holds state worth storing: restore it (off
        // the main thread) and open it to snapshot.
        if (!(await session.state.persistence.hasStateToStore(session.isOpen, session.key))) return undefined;
        return session.state.persistence.store(
          session.resource.sandbox,
          storedSnapshotOf(state),
          session.key,
          runStorageOf(runtime.store, runtime.configurable),
        );
      });
      return update === undefined ? undefined : { [SNAPSHOT_STATE_KEY]: update };
    },
    wrapModelCall: async (request, handler) => {
      const view = ptc.resolve(request.tools);
      const key = sessionKeyOf(request.runtime.configurable?.thread_id);
      const session = interpreter.get(key);
      if (session !== undefined) {
        session.state.view = view;
      } else if (ptc.enabled) {
        // A thread's first eval must see this thread's tools, not the last ones any thread was offered.
        await interpreter.run(
          key,
          async (created) => {
            created.state.view = view;
          },
          request.runtime,
        );
      }
      const catalog = task.observe(request.tools, session);
      if (cached?.view !== view || cached.task !== catalog) {
        const input = promptInput(resolved, view, catalog);
        cached = { view, task: catalog, prompt: systemPromptText(resolved, input) };
        // The description is read when tools are bound, right after this hook: keep it in step.
        evalTool.description = renderToolDescription(input);
      }
      const text = cached.prompt;
      if (text === undefined) return handler(request);
      const base = request.systemMessage;
      const separator = base.text.trim() === "" ? "" : "\n\n";
      return handler({ ...request, systemMessage: base.concat(`${separator}${text}`) });
    },
  });
  const dispose = (): void => interpreter.dispose();
  const drain = async ({ deadlineMs }: { deadlineMs: number }): Promise<{ stopped: number }> => {
    if (!Number.isFinite(deadlineMs) || deadlineMs < 0)
      throw new TypeError(`drain: deadlineMs must be a finite number >= 0, got ${String(deadlineMs)}`);
    return { stopped: await approval.drain(deadlineMs) };
  };
  return Object.assign(middleware, { dispose, drain, [Symbol.dispose]: dispose });
}
