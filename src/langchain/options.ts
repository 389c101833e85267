/**
 * Options of {@link createCodeInterpreterMiddleware}: the public shape with defaults and TSDoc,
 * and the one validator that turns user input into {@link ResolvedOptions} or throws a clear error
 * at construction time (never at the first eval).
 */
import type { StructuredToolInterface } from "@langchain/core/tools";
import type { DecisionType, InterruptOnConfig } from "langchain";
import { INTERPRETER_DEFAULTS, INTERPRETER_LIMITS, SANDBOX_LIMITS, type SandboxClock, type UsageRecord } from "../index.js";
import { camelCaseToolName } from "./signatures.js";

/** How long interpreter state lives. */
export type InterpreterMode = "thread" | "turn" | "call";

/** Named sets of tools exposed to guest code. */
export type PtcPreset = "safe" | "all";

/** One entry of the `ptc` list: a preset, the name of a tool on the agent, or a tool instance. */
export type PtcEntry = PtcPreset | string | StructuredToolInterface;

/** What to do with the interpreter's system-prompt section. */
export type SystemPromptOption =
  /** Replaces the interpreter section; the `tools` reference is still added when PTC is on. */
  | string
  /** Keeps the built-in prompt and adds this text after it, separated by a blank line. */
  | { append: string }
  /** No system prompt at all from this middleware. */
  | false
  /** Built-in prompt (same as leaving it out). */
  | null;

/**
 * Options of {@link createCodeInterpreterMiddleware}. Every field is optional. The defaults and
 * bounds are exported as `INTERPRETER_DEFAULTS` and `INTERPRETER_LIMITS` (src/options.ts).
 */
export interface CodeInterpreterMiddlewareOptions {
  /** Cap on everything guest code allocates, ArrayBuffers included. Default 64 MiB. */
  memoryLimitBytes?: number;
  /**
   * Cap on the bytes one eval hands to the host, all copies together (result, console, thrown
   * value, tool-call arguments): past it the eval fails with `COPY_LIMIT`. Default: `memoryLimitBytes`.
   */
  copyLimitBytes?: number;
  /** Cap on the guest's native stack (deep recursion becomes a catchable `RangeError`). Default: the engine's 1 MiB. */
  maxStackSizeBytes?: number;
  /** Guest execution time per eval, ms; time spent awaiting tools is not counted. Default 5000. */
  executionTimeoutMs?: number;
  /** Wall-clock budget per eval (execution plus awaited tools), ms. Default 60000, or `executionTimeoutMs` when larger. */
  wallTimeoutMs?: number;
  /** Name of the tool the model calls. Default `"eval"`. */
  toolName?: string;
  /** Show `console.*` output to the model. When false, `console` still exists and its output is discarded. Default true. */
  captureConsole?: boolean;
  /**
   * Cap on the whole text the model reads per eval (tags, markers and the status line included), in
   * characters. Parts that do not fit keep their head and tail around a marker. Default 4000; at
   * least 300 (room for every section with a head, a tail and a marker in each).
   */
  maxResultChars?: number;
  /**
   * Cap on the model-written `code` argument of one eval, in UTF-8 bytes. Longer code is refused
   * with an `InvalidArgumentError` before anything is parsed: parsing and type stripping run on
   * the Node main thread, which every session shares, and their cost grows with the code. Load
   * bulk data through tools or files instead of pasting it into code. Default 262144 (256 KiB).
   */
  maxCodeBytes?: number;
  /**
   * Full texts of cut outputs kept per thread, in characters (in the agent's files when it has
   * deepagents' `files` state, else in memory); the oldest go first. Default 1000000.
   */
  maxKeptOutputChars?: number;
  /** Replace (string), extend (`{ append }`) or turn off (`false`) the interpreter's system-prompt section. */
  systemPrompt?: SystemPromptOption;
  /**
   * Tools guest code may call as `await tools.<camelCaseName>(input)` (programmatic tool calling).
   * `"safe"` = the read-only file tools present on the agent (`read_file`, `ls`, `glob`, `grep`);
   * `"all"` = every tool on the agent except `task` and the eval tool, and requires
   * `ptcAcknowledgeUnsafe: true`. A list may mix presets, tool names and tool instances
   * (instances need not be registered on the agent). Off by default.
   *
   * A tool listed in `interruptOn` pauses the eval for human review when code calls it.
   */
  ptc?: PtcPreset | readonly PtcEntry[];
  /** Required with the `"all"` preset: you accept that guest code may call every tool, unapproved. */
  ptcAcknowledgeUnsafe?: boolean;
  /** PTC calls allowed per eval over all tools; `null` = unlimited. Default 256. */
  maxPtcCalls?: number | null;
  /** PTC calls allowed per eval for single tools, by tool name, e.g. `{ web_search: 5 }`. */
  ptcQuotas?: Readonly<Record<string, number>>;
  /**
   * Install a `task()` global for dispatching subagents from code when the agent has deepagents'
   * `task` tool; `false` turns it off. Default true.
   *
   * With `task` in `interruptOn`, each `task()` call pauses the eval for review first.
   */
  subagents?: boolean;
  /**
   * Wall-clock budget of each subagent dispatched with `task()`, ms; a subagent still running then is
   * cancelled and its promise rejects. An eval in which `task()` is available gets this much wall
   * time on top of `wallTimeoutMs`. Default 600000 (10 min).
   */
  subagentTimeoutMs?: number;
  /**
   * How long interpreter state lives: `"thread"` (default) across agent runs on one thread,
   * `"turn"` within one agent run, `"call"` within one eval. With `"thread"`, the sandbox is
   * snapshotted at the end of each agent run into the agent's `store`, or without one into the
   * checkpointer, as chunks written once each, with a reference in graph state (a private key), so
   * a restarted process or another replica restores it on the thread's next eval. With `"thread"` and `"turn"`, an eval stopped by a timeout, out of memory, the watchdog
   * or an abort is rolled back to the state after the last eval that completed.
   */
  mode?: InterpreterMode;
  /** Largest interpreter snapshot stored in graph state, bytes. Default: `memoryLimitBytes`. */
  maxSnapshotBytes?: number;
  /** HMAC key for interpreter snapshots (at least 16 bytes); unsigned snapshots when omitted (or undefined). */
  snapshotSigningKey?: string | Uint8Array | undefined;
  /**
   * What `Date` reads inside the interpreter: `"frozen"` (default: the time the eval started, constant
   * while it runs), `"real"` (the host clock), or `{ now() }` (your clock, read once per eval).
   */
  clock?: SandboxClock;
  /** Seed of `Math.random` (an integer 0..2^53-1) for reproducible runs; default: a fresh random seed per sandbox. */
  randomSeed?: number;
  /**
   * Receives one usage record per eval (billing, quotas): CPU and wall µs, peak memory, host calls
   * by name, bytes copied, attributed to `usageTenant`. Delivered after the eval, a batch per turn
   * of the event loop. Default: none.
   */
  onUsage?: (record: UsageRecord) => void;
  /** The tenant of a run's usage records and spans (hashed there), from its run config. Default: the thread id. */
  usageTenant?: (config: { configurable?: Record<string, unknown> }) => string;
  /**
   * Human review of calls made from code, in the shape of langchain's `humanInTheLoopMiddleware`:
   * `{ send_email: true, delete_file: { allowedDecisions: ["approve", "reject"] } }`, or that
   * middleware's whole configuration (`{ interruptOn, descriptionPrefix }`) so one definition serves
   * both. When guest code calls a listed tool (or `task()`, with `task` listed), the eval pauses with
   * LangGraph's `interrupt()` and the standard HITL request; resuming with
   * `new Command({ resume: { decisions: [...] } })` runs it again from its start, answering earlier
   * calls from a journal kept in the checkpointer. Needs a checkpointer.
   */
  interruptOn?: InterruptOnTools | { interruptOn?: InterruptOnTools | undefined; descriptionPrefix?: string | undefined };
  /** Most interpreter sessions kept alive at once; the least recently used idle one is closed first. Default 64. */
  maxLiveSessions?: number;
  /** An idle session is closed after this many ms. Default 1800000 (30 min). */
  sessionIdleTimeoutMs?: number;
}

/** Options after validation, with every default filled in. */
export interface ResolvedOptions {
  memoryLimitBytes: number;
  copyLimitBytes: number;
  maxStackSizeBytes: number | undefined;
  executionTimeoutMs: number;
  wallTimeoutMs: number;
  toolName: string;
  captureConsole: boolean;
  maxResultChars: number;
  maxCodeBytes: number;
  maxKeptOutputChars: number;
  systemPrompt: { kind: "default" } | { kind: "replace"; text: string } | { kind: "append"; text: string } | { kind: "off" };
  ptc: ResolvedPtcSpec;
  maxPtcCalls: number | null;
  ptcQuotas: ReadonlyMap<string, number>;
  subagents: boolean;
  subagentTimeoutMs: number;
  mode: InterpreterMode;
  maxSnapshotBytes: number;
  snapshotSigningKey: Uint8Array | undefined;
  maxLiveSessions: number;
  sessionIdleTimeoutMs: number;
  clock: SandboxClock;
  randomSeed: number | undefined;
  interruptOn: ResolvedInterruptOn;
  onUsage: ((record: UsageRecord) => void) | undefined;
  usageTenant: ((config: { configurable?: Record<string, unknown> }) => string) | undefined;
}

/** How calls of one tool are reviewed. */
export interface ResolvedReview {
  allowedDecisions: readonly DecisionType[];
  description: InterruptOnConfig["description"];
  argsSchema: Record<string, unknown> | undefined;
  when: InterruptOnConfig["when"];
}

/**
 * Tools reviewed when code calls them, by name, as langchain's `humanInTheLoopMiddleware` takes
 * them (written out here: langchain's own config type is `never` under `exactOptionalPropertyTypes`).
 */
export type InterruptOnTools = Record<string, boolean | InterruptOnConfig>;

/** The `interruptOn` option, normalised: reviewed tools by name (tools set to `false` left out). */
export interface ResolvedInterruptOn {
  tools: ReadonlyMap<string, ResolvedReview>;
  descriptionPrefix: string;
}

/** The `ptc` option, normalised: which presets, which names, which instances. */
export interface ResolvedPtcSpec {
  safe: boolean;
  all: boolean;
  names: readonly string[];
  instances: readonly StructuredToolInterface[];
}

/** Read-only file tools of deepagents (and look-alikes) that the `"safe"` preset exposes when present. */
export const SAFE_PTC_TOOL_NAMES: readonly string[] = Object.freeze(["read_file", "ls", "glob", "grep"]);

/** Name of deepagents' subagent tool: reserved for the `task()` global, never a `tools.*` member. */
export const TASK_TOOL_NAME = "task";

/** Defaults of {@link CodeInterpreterMiddlewareOptions} (defined in src/options.ts). */
export const DEFAULTS = INTERPRETER_DEFAULTS;

const KNOWN_KEYS: ReadonlySet<string> = new Set<keyof CodeInterpreterMiddlewareOptions>([
  "memoryLimitBytes", "copyLimitBytes", "maxStackSizeBytes", "executionTimeoutMs", "wallTimeoutMs", "toolName", "captureConsole",
  "maxResultChars", "maxCodeBytes", "maxKeptOutputChars", "systemPrompt", "ptc", "ptcAcknowledgeUnsafe", "maxPtcCalls", "ptcQuotas", "subagents", "subagentTimeoutMs", "mode",
  "maxSnapshotBytes", "snapshotSigningKey", "maxLiveSessions", "sessionIdleTimeoutMs", "clock", "randomSeed", "interruptOn",
  "onUsage", "usageTenant",
]);

const DECISION_TYPES: readonly DecisionType[] = ["approve", "edit", "reject"];
const REVIEW_KEYS: ReadonlySet<string> = new Set(["allowedDecisions", "description", "argsSchema", "when"]);
const HITL_CONFIG_KEYS: ReadonlySet<string> = new Set(["interruptOn", "descriptionPrefix"]);
/** humanInTheLoopMiddleware's default description prefix. */
const DEFAULT_DESCRIPTION_PREFIX = "Tool execution requires approval";

// The engine's own bounds, checked here too so mistakes surface at construction, not at the first eval.
const MAX_TIMEOUT_MS = SANDBOX_LIMITS.maxTimeoutMs;
const MIN_SIGNING_KEY_BYTES = INTERPRETER_LIMITS.minSigningKeyBytes;
// Providers accept tool names of this shape (OpenAI's is the strictest).
const TOOL_NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

function fail(message: string): never {
  throw new TypeError(`createCodeInterpreterMiddleware: ${message}`);
}

function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "bigint") return `${value}n`;
  if (value === null || typeof value !== "object") return String(value);
  return Array.isArray(value) ? "an array" : "an object";
}

function integerOption(name: string, value: unknown, fallback: number, min: number, max?: number): number;
function integerOption(name: string, value: unknown, fallback: undefined, min: number, max?: number): number | undefined;
function integerOption(name: string, value: unknown, fallback: number | undefined, min: number, max = Number.MAX_SAFE_INTEGER): number | undefined {
  if (value === undefined) return fallback;
  if (typeof value !== "number" || !Number.isSafeInteger(value) || value < min || value > max) {
    const range = max === Number.MAX_SAFE_INTEGER ? `>= ${min}` : `between ${min} and ${max}`;
    fail(`${name} must be an integer ${range}, got ${describe(value)}`);
  }
  return value;
}

function functionOption<F>(name: string, value: unknown): F | undefined {
  if (value !== undefined && typeof value !== "function") fail(`${name} must be a function, got ${describe(value)}`);
  return value as F | undefined;
}

function booleanOption(name: string, value: unknown, fallback: boolean): boolean {
  if (value === undefined) return fallback;
  if (typeof value !== "boolean") fail(`${name} must be true or false, got ${describe(value)}`);
  return value;
}

/** True for objects that can be invoked like a LangChain tool (name, description, schema, invoke). */
export function isToolInstance(value: unknown): value is StructuredToolInterface {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return typeof v.name === "string" && typeof v.invoke === "function" && "schema" in v;
}

function resolveSystemPrompt(value: unknown): ResolvedOptions["systemPrompt"] {
  if (value === undefined || value === null) return { kind: "default" };
  if (value === false) return { kind: "off" };
  if (typeof value === "string") {
    if (value.trim() === "") fail(`systemPrompt must not be empty; pass false to turn the prompt off`);
    return { kind: "replace", text: value };
  }
  if (typeof value === "object" && !Array.isArray(value)) {
    const keys = Object.keys(value);
    const append = (value as { append?: unknown }).append;
    if (keys.length === 1 && typeof append === "string" && append.trim() !== "") return { kind: "append", text: append };
  }
  fail(`systemPrompt must be a string (replaces the interpreter section), { append: string }, false (no prompt) or null (default), got ${describe(value)}`);
}

function resolvePtc(value: unknown, acknowledged: boolean, toolName: string): ResolvedPtcSpec {
  const spec = { safe: false, all: false, names: [] as string[], instances: [] as StructuredToolInterface[] };
  if (value === undefined) return spec;
  const entries: unknown[] = value === "safe" || value === "all" ? [value] : Array.isArray(value) ? value : fail(
    `ptc must be "safe", "all" or a list of presets, tool names and tool instances, got ${describe(value)}`,
  );
  const refuse = (name: string): void => {
    if (name === TASK_TOOL_NAME) {
      fail(`ptc cannot expose "${TASK_TOOL_NAME}": subagents are dispatched with the task() global (see the subagents option)`);
    }
    if (name === toolName) fail(`ptc cannot expose the interpreter's own tool "${toolName}"`);
  };
  for (const entry of entries) {
    if (entry === "safe") spec.safe = true;
    else if (entry === "all") spec.all = true;
    else if (typeof entry === "string") {
      if (!TOOL_NAME_PATTERN.test(entry)) fail(`ptc: ${describe(entry)} is not a valid tool name`);
      refuse(entry);
      if (!spec.names.includes(entry)) spec.names.push(entry);
    } else if (isToolInstance(entry)) {
      refuse(entry.name);
      if (!spec.instances.includes(entry)) spec.instances.push(entry);
    } else {
      fail(`ptc entries must be "safe", "all", a tool name or a tool instance, got ${describe(entry)}`);
    }
  }
  if (spec.all && !acknowledged) {
    fail(`ptc "all" lets guest code call every tool of the agent without approval; set ptcAcknowledgeUnsafe: true to allow it`);
  }
  // Collisions among what is known now; presets are checked again once the agent's tools are known.
  assertNoCamelCollisions([...spec.names, ...spec.instances.map((t) => t.name)]);
  return spec;
}

/**
 * Throws when two distinct tool names map to the same `tools.<camelName>` (e.g. `web_search` and
 * `web-search`), since the guest could not tell them apart.
 */
export function assertNoCamelCollisions(names: Iterable<string>): void {
  const seen = new Map<string, string>();
  for (const name of names) {
    const camel = camelCaseToolName(name);
    const other = seen.get(camel);
    if (other !== undefined && other !== name) {
      fail(`ptc tools "${other}" and "${name}" would both be tools.${camel}; expose only one of them`);
    }
    seen.set(camel, name);
  }
}

function resolveClock(value: unknown): SandboxClock {
  if (value === undefined) return DEFAULTS.clock;
  if (value === "frozen" || value === "real") return value;
  if (typeof value === "object" && value !== null && typeof (value as { now?: unknown }).now === "function") return value as SandboxClock;
  fail(`clock must be "frozen", "real" or an object with a now() method, got ${describe(value)}`);
}

function resolveQuotas(value: unknown): ReadonlyMap<string, number> {
  const quotas = new Map<string, number>();
  if (value === undefined) return quotas;
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    fail(`ptcQuotas must be an object of tool name -> calls per eval, got ${describe(value)}`);
  }
  for (const [name, limit] of Object.entries(value)) {
    quotas.set(name, integerOption(`ptcQuotas.${name}`, limit, 0, 0));
  }
  return quotas;
}

function resolveSigningKey(value: unknown): Uint8Array | undefined {
  if (value === undefined) return undefined;
  const bytes = typeof value === "string" ? new TextEncoder().encode(value) : value instanceof Uint8Array ? new Uint8Array(value) : fail(
    `snapshotSigningKey must be a string or a Uint8Array, got ${describe(value)}`,
  );
  if (bytes.length < MIN_SIGNING_KEY_BYTES) {
    fail(`snapshotSigningKey must be at least ${MIN_SIGNING_KEY_BYTES} bytes, got ${bytes.length}`);
  }
  return bytes;
}

function resolveReview(tool: string, value: unknown): ResolvedReview | undefined {
  const at = `interruptOn.${tool}`;
  if (value === false) return undefined;
  if (value === true) return { allowedDecisions: DECISION_TYPES, description: undefined, argsSchema: undefined, when: undefined };
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    fail(`${at} must be true, false or { allowedDecisions, description?, argsSchema?, when? }, got ${describe(value)}`);
  }
  for (const key of Object.keys(value)) {
    if (!REVIEW_KEYS.has(key)) fail(`${at}: unknown key ${JSON.stringify(key)}; valid keys: ${[...REVIEW_KEYS].join(", ")}`);
  }
  const v = value as Record<string, unknown>;
  const decisions = v["allowedDecisions"];
  if (!Array.isArray(decisions) || decisions.length === 0 || !decisions.every((d) => DECISION_TYPES.includes(d as DecisionType))) {
    fail(`${at}.allowedDecisions must be a non-empty list of ${DECISION_TYPES.map((d) => `"${d}"`).join(", ")}, got ${describe(decisions)}`);
  }
  const description = v["description"];
  if (description !== undefined && typeof description !== "string" && typeof description !== "function") {
    fail(`${at}.description must be a string or a function, got ${describe(description)}`);
  }
  const argsSchema = v["argsSchema"];
  if (argsSchema !== undefined && (typeof argsSchema !== "object" || argsSchema === null || Array.isArray(argsSchema))) {
    fail(`${at}.argsSchema must be a JSON Schema object, got ${describe(argsSchema)}`);
  }
  const when = v["when"];
  if (when !== undefined && typeof when !== "function") fail(`${at}.when must be a function, got ${describe(when)}`);
  return {
    allowedDecisions: [...new Set(decisions as DecisionType[])],
    description: description as ResolvedReview["description"],
    argsSchema: argsSchema as Record<string, unknown> | undefined,
    when: when as ResolvedReview["when"],
  };
}

/** Accepts a tool map, or a whole humanInTheLoopMiddleware configuration (`{ interruptOn, descriptionPrefix }`). */
function resolveInterruptOn(value: unknown, toolName: string): ResolvedInterruptOn {
  const tools = new Map<string, ResolvedReview>();
  if (value === undefined) return { tools, descriptionPrefix: DEFAULT_DESCRIPTION_PREFIX };
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    fail(`interruptOn must be an object of tool name -> true | { allowedDecisions }, or a humanInTheLoopMiddleware configuration, got ${describe(value)}`);
  }
  const v = value as Record<string, unknown>;
  const inner = v["interruptOn"];
  const isHitlConfig = Object.keys(v).every((k) => HITL_CONFIG_KEYS.has(k)) && (inner === undefined || (typeof inner === "object" && inner !== null && !Array.isArray(inner)));
  let map = v;
  let descriptionPrefix = DEFAULT_DESCRIPTION_PREFIX;
  if (isHitlConfig) {
    map = (inner ?? {}) as Record<string, unknown>;
    const prefix = v["descriptionPrefix"];
    if (prefix !== undefined && typeof prefix !== "string") fail(`interruptOn.descriptionPrefix must be a string, got ${describe(prefix)}`);
    descriptionPrefix = prefix ?? DEFAULT_DESCRIPTION_PREFIX;
  }
  for (const [tool, config] of Object.entries(map)) {
    if (tool === toolName) fail(`interruptOn.${tool}: the interpreter's own tool is reviewed by humanInTheLoopMiddleware, not inside code`);
    const review = resolveReview(tool, config);
    if (review !== undefined) tools.set(tool, review);
  }
  return { tools, descriptionPrefix };
}

/** Validates `options` and fills in defaults. Throws a `TypeError` naming the offending option. */
export function resolveOptions(options: CodeInterpreterMiddlewareOptions | undefined): ResolvedOptions {
  const input: Record<string, unknown> = (options ?? {}) as Record<string, unknown>;
  if (typeof input !== "object" || input === null || Array.isArray(input)) fail(`options must be an object, got ${describe(options)}`);
  for (const key of Object.keys(input)) {
    if (!KNOWN_KEYS.has(key)) fail(`unknown option ${JSON.stringify(key)}; known options: ${[...KNOWN_KEYS].join(", ")}`);
  }

  const toolName = input.toolName === undefined ? DEFAULTS.toolName : input.toolName;
  if (typeof toolName !== "string" || !TOOL_NAME_PATTERN.test(toolName)) {
    fail(`toolName must be 1-64 letters, digits, "_" or "-", got ${describe(toolName)}`);
  }
  if (toolName === TASK_TOOL_NAME) fail(`toolName cannot be "${TASK_TOOL_NAME}": deepagents uses that name for subagents`);

  const memory = SANDBOX_LIMITS.memoryLimitBytes;
  const memoryLimitBytes = integerOption("memoryLimitBytes", input.memoryLimitBytes, DEFAULTS.memoryLimitBytes, memory.min, memory.max);
  const maxSnapshotBytes = integerOption("maxSnapshotBytes", input.maxSnapshotBytes, memoryLimitBytes, INTERPRETER_LIMITS.minSnapshotBytes);

  let maxPtcCalls: number | null = DEFAULTS.maxPtcCalls;
  if (input.maxPtcCalls === null) maxPtcCalls = null;
  else maxPtcCalls = integerOption("maxPtcCalls", input.maxPtcCalls, DEFAULTS.maxPtcCalls, 1);

  const mode = input.mode === undefined ? DEFAULTS.mode : input.mode;
  if (mode !== "thread" && mode !== "turn" && mode !== "call") fail(`mode must be "thread", "turn" or "call", got ${describe(mode)}`);

  const acknowledged = booleanOption("ptcAcknowledgeUnsafe", input.ptcAcknowledgeUnsafe, false);
  const executionTimeoutMs = integerOption("executionTimeoutMs", input.executionTimeoutMs, DEFAULTS.executionTimeoutMs, 1, MAX_TIMEOUT_MS);
  const wallTimeoutMs = integerOption("wallTimeoutMs", input.wallTimeoutMs, Math.max(DEFAULTS.wallTimeoutMs, executionTimeoutMs), 1, MAX_TIMEOUT_MS);
  if (wallTimeoutMs < executionTimeoutMs) {
    fail(`wallTimeoutMs (${wallTimeoutMs}) must be >= executionTimeoutMs (${executionTimeoutMs}): wall time includes execution time`);
  }

  return {
    memoryLimitBytes,
    copyLimitBytes: integerOption("copyLimitBytes", input.copyLimitBytes, memoryLimitBytes, SANDBOX_LIMITS.copyLimitBytes.min, SANDBOX_LIMITS.copyLimitBytes.max),
    maxStackSizeBytes: integerOption("maxStackSizeBytes", input.maxStackSizeBytes, undefined, SANDBOX_LIMITS.maxStackSizeBytes.min, SANDBOX_LIMITS.maxStackSizeBytes.max),
    executionTimeoutMs,
    wallTimeoutMs,
    toolName,
    captureConsole: booleanOption("captureConsole", input.captureConsole, DEFAULTS.captureConsole),
    maxResultChars: integerOption("maxResultChars", input.maxResultChars, DEFAULTS.maxResultChars, INTERPRETER_LIMITS.minResultChars),
    maxCodeBytes: integerOption("maxCodeBytes", input.maxCodeBytes, DEFAULTS.maxCodeBytes, INTERPRETER_LIMITS.maxCodeBytes.min, INTERPRETER_LIMITS.maxCodeBytes.max),
    maxKeptOutputChars: integerOption("maxKeptOutputChars", input.maxKeptOutputChars, DEFAULTS.maxKeptOutputChars, 0),
    systemPrompt: resolveSystemPrompt(input.systemPrompt),
    ptc: resolvePtc(input.ptc, acknowledged, toolName),
    maxPtcCalls,
    ptcQuotas: resolveQuotas(input.ptcQuotas),
    subagents: booleanOption("subagents", input.subagents, DEFAULTS.subagents),
    subagentTimeoutMs: integerOption("subagentTimeoutMs", input.subagentTimeoutMs, DEFAULTS.subagentTimeoutMs, 1, MAX_TIMEOUT_MS),
    mode,
    maxSnapshotBytes,
    snapshotSigningKey: resolveSigningKey(input.snapshotSigningKey),
    maxLiveSessions: integerOption("maxLiveSessions", input.maxLiveSessions, DEFAULTS.maxLiveSessions, 1),
    sessionIdleTimeoutMs: integerOption("sessionIdleTimeoutMs", input.sessionIdleTimeoutMs, DEFAULTS.sessionIdleTimeoutMs, INTERPRETER_LIMITS.minSessionIdleTimeoutMs),
    clock: resolveClock(input.clock),
    randomSeed: integerOption("randomSeed", input.randomSeed, undefined, 0),
    interruptOn: resolveInterruptOn(input.interruptOn, toolName),
    onUsage: functionOption<(record: UsageRecord) => void>("onUsage", input.onUsage),
    usageTenant: functionOption<(config: { configurable?: Record<string, unknown> }) => string>("usageTenant", input.usageTenant),
  };
}
