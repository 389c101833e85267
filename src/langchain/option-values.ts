/**
 * How the composite options of {@link createCodeInterpreterMiddleware} (`systemPrompt`, `ptc`,
 * `interruptOn`) are read and normalised, and the error every option mistake throws. The option
 * schema in options.ts calls the resolvers; ptc.ts and task.ts share the tool-name rules.
 */
import type { StructuredToolInterface } from "@langchain/core/tools";
import type { DecisionType, InterruptOnConfig } from "langchain";
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

/** The `systemPrompt` option, normalised. */
export type ResolvedSystemPrompt =
  | { kind: "default" }
  | { kind: "replace"; text: string }
  | { kind: "append"; text: string }
  | { kind: "off" };

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

const DECISION_TYPES: readonly DecisionType[] = ["approve", "edit", "reject"];
const REVIEW_KEYS: ReadonlySet<string> = new Set(["allowedDecisions", "description", "argsSchema", "when"]);
const HITL_CONFIG_KEYS: ReadonlySet<string> = new Set(["interruptOn", "descriptionPrefix"]);
/** humanInTheLoopMiddleware's default description prefix. */
const DEFAULT_DESCRIPTION_PREFIX = "Tool execution requires approval";

/** Tool names providers accept (OpenAI's rule is the strictest). */
export const TOOL_NAME_PATTERN = /^[A-Za-z0-9_-]{1,64}$/;

/** Throws the `TypeError` of an option mistake, naming the factory. */
export function fail(message: string): never {
  throw new TypeError(`createCodeInterpreterMiddleware: ${message}`);
}

/** A short description of a wrong value for an error message (never its whole content). */
export function describe(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value);
  if (typeof value === "bigint") return `${value}n`;
  if (value === null || typeof value !== "object") return String(value);
  return Array.isArray(value) ? "an array" : "an object";
}

/** True for objects that can be invoked like a LangChain tool (name, description, schema, invoke). */
export function isToolInstance(value: unknown): value is StructuredToolInterface {
  if (typeof value !== "object" || value === null) return false;
  const v = value as Record<string, unknown>;
  return typeof v.name === "string" && typeof v.invoke === "function" && "schema" in v;
}

/** The `systemPrompt` option, normalised. */
export function resolveSystemPrompt(value: unknown): ResolvedSystemPrompt {
  if (value === undefined || value === null) return { kind: "default" };
  if (value === false) return { kind: "off" };
  if (typeof value === "string") {
    if (value.trim() === "") fail(`systemPrompt must not be empty; pass false to turn the prompt off`);
    return { kind: "replace", text: value };
  }
  if (typeof value === "object" && !Array.isArray(value)) {
    const keys = Object.keys(value);
    const append = (value as { append?: unknown }).append;
    if (keys.length === 1 && typeof append === "string" && append.trim() !== "")
      return { kind: "append", text: append };
  }
  fail(
    `systemPrompt must be a string (replaces the interpreter section), { append: string }, false (no prompt) or null (default), got ${describe(value)}`,
  );
}

/** The `ptc` option, normalised; `acknowledged` is `ptcAcknowledgeUnsafe`, `toolName` the eval tool's. */
export function resolvePtc(value: unknown, acknowledged: boolean, toolName: string): ResolvedPtcSpec {
  const spec = { safe: false, all: false, names: [] as string[], instances: [] as StructuredToolInterface[] };
  if (value === undefined) return spec;
  const entries: unknown[] =
    value === "safe" || value === "all"
      ? [value]
      : Array.isArray(value)
        ? value
        : fail(`ptc must be "safe", "all" or a list of presets, tool names and tool instances, got ${describe(value)}`);
  const refuse = (name: string): void => {
    if (name === TASK_TOOL_NAME) {
      fail(
        `ptc cannot expose "${TASK_TOOL_NAME}": subagents are dispatched with the task() global (see the subagents option)`,
      );
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
    fail(
      `ptc "all" lets guest code call every tool of the agent without approval; set ptcAcknowledgeUnsafe: true to allow it`,
    );
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

function resolveReview(tool: string, value: unknown): ResolvedReview | undefined {
  const at = `interruptOn.${tool}`;
  if (value === false) return undefined;
  if (value === true)
    return { allowedDecisions: DECISION_TYPES, description: undefined, argsSchema: undefined, when: undefined };
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    fail(`${at} must be true, false or { allowedDecisions, description?, argsSchema?, when? }, got ${describe(value)}`);
  }
  for (const key of Object.keys(value)) {
    if (!REVIEW_KEYS.has(key))
      fail(`${at}: unknown key ${JSON.stringify(key)}; valid keys: ${[...REVIEW_KEYS].join(", ")}`);
  }
  const v = value as Record<string, unknown>;
  const decisions = v["allowedDecisions"];
  if (
    !Array.isArray(decisions) ||
    decisions.length === 0 ||
    !decisions.every((d) => DECISION_TYPES.includes(d as DecisionType))
  ) {
    fail(
      `${at}.allowedDecisions must be a non-empty list of ${DECISION_TYPES.map((d) => `"${d}"`).join(", ")}, got ${describe(decisions)}`,
    );
  }
  const description = v["description"];
  if (description !== undefined && typeof description !== "string" && typeof description !== "function") {
    fail(`${at}.description must be a string or a function, got ${describe(description)}`);
  }
  const argsSchema = v["argsSchema"];
  if (
    argsSchema !== undefined &&
    (typeof argsSchema !== "object" || argsSchema === null || Array.isArray(argsSchema))
  ) {
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
export function resolveInterruptOn(value: unknown, toolName: string): ResolvedInterruptOn {
  const tools = new Map<string, ResolvedReview>();
  if (value === undefined) return { tools, descriptionPrefix: DEFAULT_DESCRIPTION_PREFIX };
  if (typeof value !== "object" || value === null || Array.isArray(value)) {
    fail(
      `interruptOn must be an object of tool name -> true | { allowedDecisions }, or a humanInTheLoopMiddleware configuration, got ${describe(value)}`,
    );
  }
  const v = value as Record<string, unknown>;
  const inner = v["interruptOn"];
  const isHitlConfig =
    Object.keys(v).every((k) => HITL_CONFIG_KEYS.has(k)) &&
    (inner === undefined || (typeof inner === "object" && inner !== null && !Array.isArray(inner)));
  let map = v;
  let descriptionPrefix = DEFAULT_DESCRIPTION_PREFIX;
  if (isHitlConfig) {
    map = (inner ?? {}) as Record<string, unknown>;
    const prefix = v["descriptionPrefix"];
    if (prefix !== undefined && typeof prefix !== "string")
      fail(`interruptOn.descriptionPrefix must be a string, got ${describe(prefix)}`);
    descriptionPrefix = prefix ?? DEFAULT_DESCRIPTION_PREFIX;
  }
  for (const [tool, config] of Object.entries(map)) {
    if (tool === toolName)
      fail(`interruptOn.${tool}: the interpreter's own tool is reviewed by humanInTheLoopMiddleware, not inside code`);
    const review = resolveReview(tool, config);
    if (review !== undefined) tools.set(tool, review);
  }
  return { tools, descriptionPrefix };
}
