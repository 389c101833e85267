/**
 * The eval tool: queue on the thread's session, transform the model's code, run it in the
 * session's sandbox with the `tools` namespace bound to this call (progress on the custom stream),
 * format the report with its outcome line, hint and kept full texts, and hand back a ToolMessage
 * carrying the outcome as its `artifact` (or a `Command` when there are graph-state updates).
 */
import { AsyncLocalStorage } from "node:async_hooks";
import { tool, type DynamicStructuredTool } from "@langchain/core/tools";
import { ToolMessage } from "@langchain/core/messages";
import type { BaseStore } from "@langchain/langgraph";
import {
  SandboxError,
  type ConsoleEntry,
  type EvalOptions,
  type EvalReport,
  type HostCallContext,
  type Sandbox,
  type SandboxOptions,
} from "../index.js";
import { EvalActivity, type ProgressWriter } from "./activity.js";
import { formatEvalOutput } from "./format.js";
import { hintFor } from "./hints.js";
import { keptOutputPath, OutputStore, StateFilesWriter, stateFilesOf } from "./kept-outputs.js";
import { type ResolvedOptions, type RunConfigView, sessionIsolation } from "./options.js";
import { outcomeOf, type EvalOutcomeMetadata, type KeptOutput } from "./outcome.js";
import { DURABLE_TEXT, EVAL_INPUT_DESCRIPTIONS, OUTPUT_TEXT } from "./prompts.js";
import { type Persistence, runStorageOf, type SessionPersistence } from "./persistence.js";
import { PtcEvalContext, type EvalRunConfig, type PtcResolver, type PtcToolView, type StateUpdate } from "./ptc.js";
import { restoreReplayStart, type Approval } from "./approval.js";
import type { EvalReview, ReviewedResult } from "./eval-review.js";
import { SessionRegistry, type InterpreterSession } from "./sessions.js";
import type { TaskDispatcher } from "./task.js";
import { tenantOf, traceEvalTool } from "./telemetry.js";
import { transformOffThread } from "./transform-off-thread.js";

/**
 * Sessions whose eval made the tool call running in the current async context. An eval tool call
 * for one of them would queue behind the eval waiting for it, until the wall budget ran out.
 */
const callingSessions = new AsyncLocalStorage<ReadonlySet<string>>();

function withCallingSession(key: string): ReadonlySet<string> {
  const outer = callingSessions.getStore();
  return outer?.has(key) ? outer : new Set([...(outer ?? []), key]);
}

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
  active: { context: PtcEvalContext; view: PtcToolView; activity: EvalActivity } | undefined;
  /** Full texts of cut outputs, when the agent has no files in state (read back with `readOutput`). */
  outputs: OutputStore;
  /** Snapshot bookkeeping: what to restore from, the last good state, notices for the next eval. */
  persistence: SessionPersistence;
  /** Start state of an eval paused for review: the next sandbox is restored from it (approval.ts). */
  replayStart: Uint8Array | undefined;
  /** An eval paused for review and kept alive for its resume (approval.ts). */
  pausedEval: EvalReview | undefined;
}

export type Interpreter = SessionRegistry<LiveSandbox, SessionState, RunConfigView>;
type Session = InterpreterSession<LiveSandbox, SessionState, RunConfigView>;

const SCRIPT_FILENAME = "<eval>";
/** Guest function reading the session's {@link OutputStore}. */
const READ_OUTPUT_FUNCTION = "readOutput";
const DEFAULT_SESSION_KEY = "default";

/** The session key of a run: its LangGraph thread, or the middleware instance's own session. */
export function sessionKeyOf(threadId: unknown): string {
  return typeof threadId === "string" && threadId !== "" ? `thread:${threadId}` : DEFAULT_SESSION_KEY;
}

export function sandboxOptions(options: ResolvedOptions): SandboxOptions {
  const out: SandboxOptions = {
    memoryLimitBytes: options.memoryLimitBytes,
    copyLimitBytes: options.copyLimitBytes,
    executionTimeoutMs: options.executionTimeoutMs,
    wallTimeoutMs: options.wallTimeoutMs,
    captureConsole: options.captureConsole,
    clock: options.clock,
    partition: options.partition,
  };
  if (options.maxStackSizeBytes !== undefined) out.maxStackSizeBytes = options.maxStackSizeBytes;
  if (options.randomSeed !== undefined) out.randomSeed = options.randomSeed;
  if (options.onUsage !== undefined) out.onUsage = options.onUsage;
  return out;
}

/** Creates the session registry of one middleware instance. */
export function createInterpreter(options: ResolvedOptions, persistence: Persistence): Interpreter {
  return new SessionRegistry<LiveSandbox, SessionState, RunConfigView>({
    maxLiveSessions: options.maxLiveSessions,
    idleTimeoutMs: options.sessionIdleTimeoutMs,
    open: (session) => {
      // Host functions are not part of a snapshot: they are defined again on every sandbox.
      const sandbox = session.state.persistence.open();
      sandbox.defineFunction(READ_OUTPUT_FUNCTION, (path: unknown) => {
        const text = typeof path === "string" ? session.state.outputs.get(path) : undefined;
        if (text === undefined) throw new Error(OUTPUT_TEXT.noKeptOutput(String(path)));
        return text;
      });
      return { sandbox, defined: new Set() };
    },
    close: (live) => live.sandbox.dispose(),
    // A session's tier is chosen once, by the run that creates it.
    initState: (config) => ({
      view: undefined,
      active: undefined,
      outputs: new OutputStore(options.maxKeptOutputChars),
      persistence: persistence.forSession(sessionIsolation(options, config)),
      replayStart: undefined,
      pausedEval: undefined,
    }),
  });
}

/**
 * Makes the sandbox's `tools` namespace match `view`: defines `tools.<name>` for each guest name
 * (camel-cased, and the tool's own name as an alias) not yet defined, and deletes those the model
 * is no longer offered (middleware may filter tools per turn). Each host function looks up the eval
 * running at call time, so one definition serves every later eval.
 */
async function bindTools(session: Session, live: LiveSandbox, view: PtcToolView): Promise<void> {
  for (const guestName of [...live.defined]) {
    if (view.byGuestName.has(guestName)) continue;
    // The guest may have replaced or frozen `tools` (even with a Proxy): whether or not the delete
    // succeeds, the host function refuses calls to a tool this eval is not offered. A disposed
    // sandbox is reported by the eval itself.
    await live.sandbox.removeGlobal(`tools.${guestName}`).catch(() => false);
    live.defined.delete(guestName);
  }
  for (const guestName of view.byGuestName.keys()) {
    if (live.defined.has(guestName)) continue;
    live.sandbox.defineAsyncFunction(`tools.${guestName}`, (args: unknown[], { signal }: HostCallContext) => {
      const active = session.state.active;
      const target = active?.view.byGuestName.get(guestName);
      if (active === undefined || target === undefined) {
        throw new Error(`tools.${guestName} is not available in this eval`);
      }
      return callingSessions.run(withCallingSession(session.key), () => active.context.call(target, args, signal));
    });
    live.defined.add(guestName);
  }
}

/** What one eval produced for the model and for the graph. */
export interface EvalOutcome {
  text: string;
  /** False when the code threw or was stopped: the ToolMessage is then marked as an error. */
  ok: boolean;
  updates: readonly StateUpdate[];
  metadata: EvalOutcomeMetadata;
}

/** LangGraph's custom-stream writer for this run, when the caller streams in "custom" mode. */
function writerOf(config: EvalRunConfig): ProgressWriter | undefined {
  const candidate =
    (config as { writer?: unknown }).writer ?? (config.configurable as { writer?: unknown } | undefined)?.writer;
  return typeof candidate === "function" ? (candidate as ProgressWriter) : undefined;
}

/** Sandbox global names for the hints, bounded (a hostile guest may define millions), read without running guest code. */
function globalNamesOf(sandbox: Sandbox): readonly string[] {
  try {
    return sandbox.globalNames(5000);
  } catch {
    return [];
  }
}

async function evaluate(
  session: Session,
  input: EvalToolInput,
  firstConfig: EvalRunConfig,
  deps: EvalToolDeps,
  review?: EvalReview,
): Promise<ReviewedResult<EvalOutcome>> {
  const { options } = deps;
  // A paused eval taken over by the run that resumed it ends under that run's config.
  let config = firstConfig;
  if (input.reset === true) {
    session.discard();
    session.state.persistence.reset();
  }
  if (!session.isOpen && input.reset !== true)
    session.state.persistence.prepareOnEval(config.state, deps.interpreter.takeEviction(session.key));
  if (!session.isOpen)
    await session.state.persistence.load(
      runStorageOf((config as { store?: BaseStore }).store, config.configurable),
      session.key,
    );
  if (!session.isOpen && session.state.replayStart === undefined) await session.state.persistence.restore(session.key);
  const view = session.state.view ?? deps.ptc.latest;
  const evalCallId = config.toolCall?.id ?? config.toolCallId ?? `eval-${Date.now()}`;
  const activity = new EvalActivity(evalCallId, writerOf(config));
  const context = new PtcEvalContext(config, options, activity, review);
  activity.emit({ event: "eval_start" });
  let tasks: ReturnType<TaskDispatcher["begin"]>;
  try {
    if (!session.isOpen && session.state.replayStart !== undefined) await restoreReplayStart(session.state);
    const live = session.resource;
    await bindTools(session, live, view);
    tasks = deps.task?.begin(session, live.sandbox, config, options.wallTimeoutMs, activity, review);
    const transformed = await transformOffThread(input.code, options.executionTimeoutMs);
    session.state.active = { context, view, activity };
    // Console lines reach the custom stream as the guest writes them, not when the eval ends.
    const onConsole =
      activity.streaming || review !== undefined ? (entry: ConsoleEntry) => activity.console(entry) : undefined;
    review?.onTakeover((next) => {
      config = next;
      context.rebind(next);
      activity.rebind(writerOf(next));
      tasks?.rebind(next);
    });
    const runOptions: EvalOptions = {
      filename: SCRIPT_FILENAME,
      unserializable: "describe",
      // The value is only rendered within maxResultChars: a copy for display is enough.
      displayChars: options.maxResultChars,
      ...tenantOf(options, config),
      ...(config.signal === undefined ? {} : { signal: config.signal }),
      ...(tasks === undefined ? {} : { wallTimeoutMs: tasks.wallTimeoutMs }),
      ...(onConsole === undefined ? {} : { onConsole }),
      // Reviewed calls in reach: a pinned clock and seed, and a signal that can pause the eval.
      ...(await review?.start(live.sandbox, view, tasks !== undefined, config.signal, onConsole)),
    };
    // The last good state is written by the eval's own job, right after the eval.
    const { report, snapshot } = deps.persistence.rollsBack
      ? await live.sandbox.runThenSnapshot(transformed.code, runOptions, deps.persistence.lastGoodOptions)
      : { report: await live.sandbox.run(transformed.code, runOptions), snapshot: undefined };
    if (review?.paused) return review.park(session);
    // A sandbox the engine gave up on (or whose helper process died) cannot serve the next eval;
    // that one starts from the last good state, as after a failed restore.
    const broken = !report.ok && ["BROKEN", "DISPOSED", "WORKER_LOST"].includes(report.error.code);
    // A stopped eval rolls back: the next eval starts from the last good state.
    const { notices, discard } = session.state.persistence.settle(report, live.sandbox, snapshot, broken);
    if (discard) session.discard();
    const hint = hintFor(report, {
      activity,
      view,
      globalNames: () => (broken ? [] : globalNamesOf(live.sandbox)),
      wallTimeoutMs: tasks?.wallTimeoutMs ?? options.wallTimeoutMs,
    });
    const files = stateFilesOf(config.state);
    const filesWriter = files === undefined ? undefined : new StateFilesWriter(files, options.maxKeptOutputChars);
    const kept: KeptOutput[] = [];
    const keep = (
      section: KeptOutput["section"],
      text: string,
      head: (chars: number) => string,
    ): KeptOutput | undefined => {
      if (options.maxKeptOutputChars === 0) return undefined;
      const path = keptOutputPath(evalCallId, section);
      const entry = filesWriter?.put(section, path, text, head) ?? session.state.outputs.put(section, path, text, head);
      kept.push(entry);
      return entry;
    };
    // The status line does not depend on what is kept, so it is rendered before the parts are cut.
    const status = OUTPUT_TEXT.outcome(outcomeOf(report, activity, [], hint));
    const text = formatEvalOutput(report, {
      maxResultChars: options.maxResultChars,
      filename: SCRIPT_FILENAME,
      ...(transformed.lineMap === undefined ? {} : { lineMap: transformed.lineMap }),
      keep,
      status,
      notices,
      ...(hint === undefined ? {} : { hint }),
    });
    const updates = [...context.updates, ...(filesWriter?.updates ?? [])];
    const metadata = outcomeOf(report, activity, kept, hint);
    activity.emit({ event: "eval_end", outcome: metadata });
    return { text, ok: report.ok, updates, metadata };
  } finally {
    tasks?.end();
    session.state.active = undefined;
    if (options.mode === "call") session.discard();
  }
}

/** An eval that could not run or resume, with the reason as its text. */
function failedOutcome(text: string): EvalOutcome {
  return {
    text,
    ok: false,
    updates: [],
    metadata: { status: "error", toolCalls: {}, subagentCalls: 0, executionMs: 0, wallMs: 0, kept: [] },
  };
}

/** What the eval tool needs from its middleware. */
export interface EvalToolDeps {
  options: ResolvedOptions;
  interpreter: Interpreter;
  persistence: Persistence;
  ptc: PtcResolver;
  /** `task()` for subagents; absent when the middleware never installs it. */
  task?: TaskDispatcher;
  /** Human review of calls from code (`interruptOn`). */
  approval?: Approval;
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
  const message = new ToolMessage({
    content: outcome.text,
    artifact: outcome.metadata,
    tool_call_id: toolCallId,
    name: toolName,
    status: outcome.ok ? "success" : "error",
  });
  if (outcome.updates.length === 0) return message;
  // Only tools that themselves return a Command get here, so @langchain/langgraph is installed.
  commandModule ??= import("@langchain/langgraph");
  const { Command } = await commandModule;
  return new Command({ update: [...outcome.updates, ["messages", [message]]] });
}

const INPUT_KEYS = new Set(["code", "reset"]);

/**
 * Why the eval tool's arguments are refused, if they are: they do not fit its schema, or the code
 * is over `maxCodeBytes`. Checked before anything is parsed or queued.
 */
export function refusalOf(input: unknown, maxCodeBytes: number): SandboxError | undefined {
  const refuse = (problem: string): SandboxError =>
    new SandboxError("INVALID_ARGUMENT", OUTPUT_TEXT.badEvalInput(problem));
  if (typeof input !== "object" || input === null || Array.isArray(input))
    return refuse(
      `got ${input === null ? "null" : Array.isArray(input) ? "an array" : typeof input} instead of an object`,
    );
  const fields = input as Record<string, unknown>;
  const unknown = Object.keys(fields).find((key) => !INPUT_KEYS.has(key));
  if (unknown !== undefined) return refuse(`unknown argument ${JSON.stringify(unknown.slice(0, 40))}`);
  const code = fields["code"];
  if (typeof code !== "string")
    return refuse(code === undefined ? "it is missing" : `got ${code === null ? "null" : typeof code}`);
  if (fields["reset"] !== undefined && typeof fields["reset"] !== "boolean")
    return refuse(`\`reset\` must be a boolean; got ${typeof fields["reset"]}`);
  // UTF-8 never takes fewer bytes than UTF-16 code units: only code under the cap in units is measured.
  const bytes = code.length > maxCodeBytes ? code.length : Buffer.byteLength(code);
  if (bytes > maxCodeBytes) return new SandboxError("INVALID_ARGUMENT", OUTPUT_TEXT.codeTooLarge(bytes, maxCodeBytes));
  return undefined;
}

/** `BUSY` when a tool called by this thread's running eval calls the eval tool of the same thread. */
function reentryOf(config: EvalRunConfig): SandboxError | undefined {
  const key = sessionKeyOf(config.configurable?.thread_id);
  return callingSessions.getStore()?.has(key) ? new SandboxError("BUSY", OUTPUT_TEXT.evalReentered) : undefined;
}

const NO_STATS = { executionMs: 0, wallMs: 0, hostCalls: 0, memoryUsedBytes: 0, peakMemoryBytes: 0 };

/** The eval's output for refused arguments: the typed one-line error, as every eval error reads. */
function refusedOutcome(error: SandboxError, evalCallId: string, options: ResolvedOptions): EvalOutcome {
  const report: EvalReport = { ok: false, error, console: [], consoleTruncated: false, stats: NO_STATS };
  const metadata = outcomeOf(report, new EvalActivity(evalCallId, undefined), [], undefined);
  const text = formatEvalOutput(report, {
    maxResultChars: options.maxResultChars,
    status: OUTPUT_TEXT.outcome(metadata),
  });
  return { text, ok: false, updates: [], metadata };
}

function isToolCall(arg: unknown): arg is { id?: string; args: unknown; type: "tool_call" } {
  return typeof arg === "object" && arg !== null && (arg as { type?: unknown }).type === "tool_call";
}

/**
 * Creates the eval tool of one middleware instance. `description` is the text for the tools known
 * at construction; the middleware refreshes it per turn once the agent's tools are known.
 */
export function createEvalTool(deps: EvalToolDeps, description: string): DynamicStructuredTool {
  const { options } = deps;
  const evalTool = buildEvalTool(deps, description);
  // LangChain validates arguments before the tool function runs and reports a failure to the model
  // with a host stack trace (file paths included). Arguments are checked here first, so the model
  // reads a one-line typed error instead; valid ones go through LangChain's own path unchanged.
  const call = evalTool.call.bind(evalTool);
  evalTool.call = async (arg, configArg, tags) => {
    const config = (typeof configArg === "object" && configArg !== null ? configArg : {}) as EvalRunConfig;
    const error = refusalOf(isToolCall(arg) ? arg.args : arg, options.maxCodeBytes) ?? reentryOf(config);
    if (error === undefined) return call(arg, configArg, tags);
    const toolCallId = (isToolCall(arg) ? arg.id : undefined) ?? config.toolCall?.id ?? config.toolCallId;
    const outcome = refusedOutcome(error, toolCallId ?? `eval-${Date.now()}`, options);
    return toToolOutput(outcome, toolCallId === undefined ? {} : { ...config, toolCallId }, options.toolName);
  };
  return evalTool;
}

function buildEvalTool(deps: EvalToolDeps, description: string): DynamicStructuredTool {
  const { options, interpreter } = deps;
  return tool(
    async (input: EvalToolInput, config: EvalRunConfig) => {
      const key = sessionKeyOf(config.configurable?.thread_id);
      // The span of this tool call: the eval's span and its host calls' spans nest below it.
      return traceEvalTool(options.toolName, config, key, async () => {
        const review = deps.approval?.forCall(config, input.code, key);
        const run = interpreter.run(
          key,
          async (session) => {
            // Also an eval queued before the drain began: it has not started, so it is refused.
            if (deps.approval?.draining === true) return failedOutcome(DURABLE_TEXT.draining);
            if (review !== undefined)
              return review.drive(session, (gate) => evaluate(session, input, config, deps, gate), failedOutcome);
            // An eval paused for review and kept alive stops before another eval of the thread runs.
            await session.state.pausedEval?.stop();
            return evaluate(session, input, config, deps) as Promise<EvalOutcome>;
          },
          config,
        );
        const outcome = await (deps.approval?.track(run) ?? run);
        return toToolOutput(outcome, config, options.toolName);
      });
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
