/**
 * Options of {@link createCodeInterpreterMiddleware}, declared once: one zod object holds every
 * option with its TSDoc, its default and its accepted values side by side. The public type, the
 * resolved type, the unknown-key error and validation all derive from it. Options are resolved
 * once per middleware, at construction (never at the first eval); a mistake throws a `TypeError`
 * naming the option and what it accepts.
 *
 * The public type is a mapped type over the documented shape rather than `z.input` of the object:
 * emitted declarations print `z.input<…>`'s fields without their comments, while a mapped type over
 * the shape keeps each field's TSDoc in editor hovers (checked on dist/langchain/options.d.ts).
 */
import { z } from "zod/v4";
import {
  SANDBOX_DEFAULTS,
  SANDBOX_LIMITS,
  type SandboxClock,
  SandboxError,
  type SandboxIsolation,
  type UsageRecord,
} from "../index.js";
import { INTERPRETER_LIMITS } from "./limits.js";
import {
  describe,
  fail,
  type InterpreterMode,
  type InterruptOnTools,
  type PtcEntry,
  type PtcPreset,
  resolveInterruptOn,
  resolvePtc,
  resolveSystemPrompt,
  type SystemPromptOption,
  TASK_TOOL_NAME,
  TOOL_NAME_PATTERN,
} from "./option-values.js";

export { assertNoCamelCollisions, isToolInstance, SAFE_PTC_TOOL_NAMES, TASK_TOOL_NAME } from "./option-values.js";
export type {
  InterpreterMode,
  InterruptOnTools,
  PtcEntry,
  PtcPreset,
  ResolvedInterruptOn,
  ResolvedPtcSpec,
  ResolvedReview,
  SystemPromptOption,
} from "./option-values.js";

const KiB = 1024;
const MAX_TIMEOUT_MS = SANDBOX_LIMITS.maxTimeoutMs;
const ISOLATION_TIERS = ["in-process", "process"] as const;

/** The run config the option functions read (LangGraph's, narrowed to what they see). */
export interface RunConfigView {
  configurable?: Record<string, unknown>;
}

/** The `isolation` option as a function: the tier of the session of thread `threadId` (undefined without one). */
export type IsolationChooser = (threadId: string | undefined, config: RunConfigView) => SandboxIsolation;

/**
 * The tier of a session created by a run with `config`: the `isolation` option, or what its
 * function returns for the run. Throws `INVALID_ARGUMENT` when the function returns something else.
 */
export function sessionIsolation(options: ResolvedOptions, config: RunConfigView | undefined): SandboxIsolation {
  const { isolation } = options;
  if (typeof isolation !== "function") return isolation;
  const configurable = config?.configurable;
  const threadId = configurable?.thread_id;
  const chosen: unknown = isolation(typeof threadId === "string" && threadId !== "" ? threadId : undefined, {
    ...(configurable === undefined ? {} : { configurable }),
  });
  if (chosen === "in-process" || chosen === "process") return chosen;
  throw new SandboxError(
    "INVALID_ARGUMENT",
    `isolation(threadId, config) must return "in-process" or "process", got ${describe(chosen)}`,
  );
}

/** An integer option within `[min, max]`; its error names the range and what was given. */
function integer(min: number, max = Number.MAX_SAFE_INTEGER): z.ZodNumber {
  const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `between ${min} and ${max}`;
  const error = (issue: { input?: unknown }): string => `must be an integer ${range}, got ${describe(issue.input)}`;
  return z.number({ error }).int({ error }).min(min, { error }).max(max, { error });
}

function boolean(): z.ZodBoolean {
  return z.boolean({ error: (issue) => `must be true or false, got ${describe(issue.input)}` });
}

function callback<F extends (...args: never[]) => unknown>(): z.ZodCustom<F, F> {
  return z.custom<F>((value) => typeof value === "function", {
    error: (issue) => `must be a function, got ${describe(issue.input)}`,
  });
}

/** Copies the key (the caller's buffer may change later) and checks its length. */
function signingKey(value: string | Uint8Array | undefined, ctx: z.RefinementCtx): Uint8Array | undefined {
  if (value === undefined) return undefined;
  const bytes = typeof value === "string" ? new TextEncoder().encode(value) : new Uint8Array(value);
  if (bytes.length < INTERPRETER_LIMITS.minSigningKeyBytes) {
    ctx.issues.push({
      code: "custom",
      input: value,
      message: `must be at least ${INTERPRETER_LIMITS.minSigningKeyBytes} bytes, got ${bytes.length}`,
    });
  }
  return bytes;
}

const optionsShape = {
  /** Cap on everything guest code allocates, ArrayBuffers included. Default 64 MiB. */
  memoryLimitBytes: integer(SANDBOX_LIMITS.memoryLimitBytes.min, SANDBOX_LIMITS.memoryLimitBytes.max).default(
    SANDBOX_DEFAULTS.memoryLimitBytes,
  ),
  /**
   * Cap on the bytes one eval hands to the host, all copies together (result, console, thrown
   * value, tool-call arguments): past it the eval fails with `COPY_LIMIT`. Default: `memoryLimitBytes`.
   */
  copyLimitBytes: integer(SANDBOX_LIMITS.copyLimitBytes.min, SANDBOX_LIMITS.copyLimitBytes.max).optional(),
  /** Cap on the guest's native stack (deep recursion becomes a catchable `RangeError`). Default: the engine's 1 MiB. */
  maxStackSizeBytes: integer(SANDBOX_LIMITS.maxStackSizeBytes.min, SANDBOX_LIMITS.maxStackSizeBytes.max).optional(),
  /** Guest execution time per eval, ms; time spent awaiting tools is not counted. Default 5000. */
  executionTimeoutMs: integer(1, MAX_TIMEOUT_MS).default(SANDBOX_DEFAULTS.executionTimeoutMs),
  /** Wall-clock budget per eval (execution plus awaited tools), ms. Default 60000, or `executionTimeoutMs` when larger. */
  wallTimeoutMs: integer(1, MAX_TIMEOUT_MS).optional(),
  /** Name of the tool the model calls (1-64 letters, digits, `_` or `-`; not `task`). Default `"eval"`. */
  toolName: z
    .string({ error: (issue) => `must be 1-64 letters, digits, "_" or "-", got ${describe(issue.input)}` })
    .regex(TOOL_NAME_PATTERN, {
      error: (issue) => `must be 1-64 letters, digits, "_" or "-", got ${describe(issue.input)}`,
    })
    .refine((name) => name !== TASK_TOOL_NAME, {
      error: `cannot be "${TASK_TOOL_NAME}": deepagents uses that name for subagents`,
    })
    .default("eval"),
  /** Show `console.*` output to the model. When false, `console` still exists and its output is discarded. Default true. */
  captureConsole: boolean().default(SANDBOX_DEFAULTS.captureConsole),
  /**
   * Cap on the whole text the model reads per eval (tags, markers and the status line included), in
   * characters. Parts that do not fit keep their head and tail around a marker. Default 4000; at
   * least 300 (room for every section with a head, a tail and a marker in each).
   */
  maxResultChars: integer(INTERPRETER_LIMITS.minResultChars).default(4000),
  /**
   * Cap on the model-written `code` argument of one eval, in UTF-8 bytes. Longer code is refused
   * with an `InvalidArgumentError` before anything is parsed: parsing and type stripping run on
   * the Node main thread, which every session shares, and their cost grows with the code. Load
   * bulk data through tools or files instead of pasting it into code. Default 262144 (256 KiB).
   */
  maxCodeBytes: integer(INTERPRETER_LIMITS.maxCodeBytes.min, INTERPRETER_LIMITS.maxCodeBytes.max).default(256 * KiB),
  /**
   * Full texts of cut outputs kept per thread, in characters (in the agent's files when it has
   * deepagents' `files` state, else in memory); the oldest go first. Default 1000000.
   */
  maxKeptOutputChars: integer(0).default(1_000_000),
  /** Replace (string), extend (`{ append }`) or turn off (`false`) the interpreter's system-prompt section. */
  systemPrompt: z.custom<SystemPromptOption>().optional().transform(resolveSystemPrompt),
  /**
   * Tools guest code may call as `await tools.<camelCaseName>(input)` (programmatic tool calling).
   * `"safe"` = the read-only file tools present on the agent (`read_file`, `ls`, `glob`, `grep`);
   * `"all"` = every tool on the agent except `task` and the eval tool, and requires
   * `ptcAcknowledgeUnsafe: true`. A list may mix presets, tool names and tool instances
   * (instances need not be registered on the agent). Off by default.
   *
   * A tool listed in `interruptOn` pauses the eval for human review when code calls it.
   */
  ptc: z.custom<PtcPreset | readonly PtcEntry[]>().optional(),
  /** Required with the `"all"` preset: you accept that guest code may call every tool, unapproved. */
  ptcAcknowledgeUnsafe: boolean().default(false),
  /** PTC calls allowed per eval over all tools; `null` = unlimited. Default 256. */
  maxPtcCalls: integer(1).nullable().default(256),
  /** PTC calls allowed per eval for single tools, by tool name, e.g. `{ web_search: 5 }`. */
  ptcQuotas: z
    .record(z.string(), integer(0), {
      error: (issue) => `must be an object of tool name -> calls per eval, got ${describe(issue.input)}`,
    })
    .optional()
    .transform((quotas): ReadonlyMap<string, number> => new Map(Object.entries(quotas ?? {}))),
  /**
   * Install a `task()` global for dispatching subagents from code when the agent has deepagents'
   * `task` tool; `false` turns it off. Default true.
   *
   * With `task` in `interruptOn`, each `task()` call pauses the eval for review first.
   */
  subagents: boolean().default(true),
  /**
   * Wall-clock budget of each subagent dispatched with `task()`, ms; a subagent still running then is
   * cancelled and its promise rejects. An eval in which `task()` is available gets this much wall
   * time on top of `wallTimeoutMs`. Default 600000 (10 min).
   */
  subagentTimeoutMs: integer(1, MAX_TIMEOUT_MS).default(600_000),
  /**
   * How long interpreter state lives: `"thread"` (default) across agent runs on one thread,
   * `"turn"` within one agent run, `"call"` within one eval. With `"thread"`, the sandbox is
   * snapshotted at the end of each agent run into the agent's `store`, or without one into the
   * checkpointer, as chunks written once each, with a reference in graph state (a private key), so
   * a restarted process or another replica restores it on the thread's next eval. With `"thread"` and `"turn"`, an eval stopped by a timeout, out of memory, the watchdog
   * or an abort is rolled back to the state after the last eval that completed.
   */
  mode: z
    .enum(["thread", "turn", "call"], {
      error: (issue) => `must be "thread", "turn" or "call", got ${describe(issue.input)}`,
    })
    .default("thread" satisfies InterpreterMode),
  /** Largest interpreter snapshot stored in graph state, bytes. Default: `memoryLimitBytes`. */
  maxSnapshotBytes: integer(INTERPRETER_LIMITS.minSnapshotBytes).optional(),
  /** HMAC key for interpreter snapshots (at least 16 bytes); unsigned snapshots when omitted (or undefined). */
  snapshotSigningKey: z
    .custom<string | Uint8Array>((value) => typeof value === "string" || value instanceof Uint8Array, {
      error: (issue) => `must be a string or a Uint8Array, got ${describe(issue.input)}`,
    })
    .optional()
    .transform(signingKey),
  /**
   * What `Date` reads inside the interpreter: `"frozen"` (default: the time the eval started, constant
   * while it runs), `"real"` (the host clock), or `{ now() }` (your clock, read once per eval).
   */
  clock: z
    .custom<SandboxClock>(
      (value) =>
        value === "frozen" ||
        value === "real" ||
        (typeof value === "object" && value !== null && typeof (value as { now?: unknown }).now === "function"),
      {
        error: (issue) => `must be "frozen", "real" or an object with a now() method, got ${describe(issue.input)}`,
      },
    )
    .default(SANDBOX_DEFAULTS.clock),
  /** Seed of `Math.random` (an integer 0..2^53-1) for reproducible runs; default: a fresh random seed per sandbox. */
  randomSeed: integer(0).optional(),
  /**
   * Where each session's interpreter lives: `"in-process"` (default) or `"process"`, a confined
   * helper process (see the README's two tiers), in the partition `partition`. A lost helper
   * fails that eval with `InterpreterLostError`; the next eval starts from the session's last state.
   * Or a function of the run, `(threadId, config) => "in-process" | "process"`, called once per
   * session, when the session is created (its first eval or model call of the thread, and again after
   * the session was closed for being idle or evicted); it must not throw.
   */
  isolation: z
    .union([z.enum(ISOLATION_TIERS), callback<IsolationChooser>()], {
      error: (issue) => `must be "in-process", "process" or a function returning one, got ${describe(issue.input)}`,
    })
    .default("in-process"),
  /** With `isolation: "process"`: the partition (tenant id) whose helper processes the sessions share. Default `""`. */
  partition: z.string().max(256).default(""),
  /**
   * Receives one usage record per eval (billing, quotas): CPU and wall µs, peak memory, host calls
   * by name, bytes copied, attributed to `usageTenant`. Delivered after the eval, a batch per turn
   * of the event loop. Default: none.
   */
  onUsage: callback<(record: UsageRecord) => void>().optional(),
  /** The tenant of a run's usage records and spans (hashed there), from its run config. Default: the thread id. */
  usageTenant: callback<(config: RunConfigView) => string>().optional(),
  /**
   * Durable evals (default true): with a checkpointer, each host call an eval makes (tools, `task()`)
   * is journaled in the checkpointer as it completes, and a new call starts only once the calls that
   * completed before it are stored. When the process dies mid-eval, continuing the thread
   * (`agent.invoke(null, config)`) in any process replays the eval from its start, answering
   * journaled calls from the journal; a call in flight at the crash runs at most once more. The
   * journal and start state are capped by `maxSnapshotBytes`; over it, the eval stops before its
   * next call.
   */
  durableEvals: boolean().default(true),
  /**
   * Human review of calls made from code, in the shape of langchain's `humanInTheLoopMiddleware`:
   * `{ send_email: true, delete_file: { allowedDecisions: ["approve", "reject"] } }`, or that
   * middleware's whole configuration (`{ interruptOn, descriptionPrefix }`) so one definition serves
   * both. When guest code calls a listed tool (or `task()`, with `task` listed), the eval pauses with
   * LangGraph's `interrupt()` and the standard HITL request; resuming with
   * `new Command({ resume: { decisions: [...] } })` runs it again from its start, answering earlier
   * calls from a journal kept in the checkpointer. Needs a checkpointer.
   */
  interruptOn: z
    .custom<InterruptOnTools | { interruptOn?: InterruptOnTools | undefined; descriptionPrefix?: string | undefined }>()
    .optional(),
  /** Most interpreter sessions kept alive at once; the least recently used idle one is closed first. Default 64. */
  maxLiveSessions: integer(1).default(64),
  /** An idle session is closed after this many ms. Default 1800000 (30 min). */
  sessionIdleTimeoutMs: integer(INTERPRETER_LIMITS.minSessionIdleTimeoutMs).default(30 * 60 * 1000),
};

/** The options; fields resolved together (defaults that follow another option, and their checks) last. */
const optionsSchema = z.strictObject(optionsShape).transform((o, ctx) => {
  const wallTimeoutMs = o.wallTimeoutMs ?? Math.max(SANDBOX_DEFAULTS.wallTimeoutMs, o.executionTimeoutMs);
  if (wallTimeoutMs < o.executionTimeoutMs) {
    ctx.issues.push({
      code: "custom",
      input: o.wallTimeoutMs,
      path: ["wallTimeoutMs"],
      message: `(${wallTimeoutMs}) must be >= executionTimeoutMs (${o.executionTimeoutMs}): wall time includes execution time`,
    });
  }
  const { ptcAcknowledgeUnsafe, ...options } = o;
  return {
    ...options,
    copyLimitBytes: o.copyLimitBytes ?? o.memoryLimitBytes,
    wallTimeoutMs,
    maxSnapshotBytes: o.maxSnapshotBytes ?? o.memoryLimitBytes,
    ptc: resolvePtc(o.ptc, ptcAcknowledgeUnsafe, o.toolName),
    interruptOn: resolveInterruptOn(o.interruptOn, o.toolName),
  };
});

/**
 * Options of {@link createCodeInterpreterMiddleware}. Every field is optional; each one's TSDoc
 * gives its default and accepted values.
 */
export type CodeInterpreterMiddlewareOptions = {
  -readonly [K in keyof typeof optionsShape]?: z.input<(typeof optionsShape)[K]>;
};

/** Options after validation, with every default filled in. */
export type ResolvedOptions = z.output<typeof optionsSchema>;

const KNOWN_OPTIONS = Object.keys(optionsShape).join(", ");

/** Validates `options` and fills in defaults. Throws a `TypeError` naming the offending option and what it accepts. */
export function resolveOptions(options: CodeInterpreterMiddlewareOptions | undefined): ResolvedOptions {
  if (options !== undefined && options !== null && (typeof options !== "object" || Array.isArray(options)))
    fail(`options must be an object, got ${describe(options)}`);
  const parsed = optionsSchema.safeParse(options ?? {});
  if (parsed.success) return parsed.data;
  const issue = parsed.error.issues[0]!;
  if (issue.code === "unrecognized_keys")
    fail(`unknown option ${JSON.stringify(issue.keys[0])}; known options: ${KNOWN_OPTIONS}`);
  fail(`${issue.path.join(".")} ${issue.message}`);
}
