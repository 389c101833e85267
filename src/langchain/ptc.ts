/**
 * Programmatic tool calling: which agent tools guest code may call as `tools.<camelName>(input)`,
 * the per-eval call budget and quotas, the run config each call inherits, and how a tool's output
 * becomes a typed guest value (plus graph-state updates when the tool returns a `Command`).
 */
import type { StructuredToolInterface, ToolRunnableConfig } from "@langchain/core/tools";
import { nameHostCall } from "../index.js";
import {
  assertNoCamelCollisions,
  isToolInstance,
  SAFE_PTC_TOOL_NAMES,
  TASK_TOOL_NAME,
  type ResolvedPtcSpec,
} from "./options.js";
import type { EvalActivity } from "./activity.js";
import { camelCaseToolName } from "./signatures.js";
import type { HostCallGate } from "./approval.js";

/** A tool exposed to guest code. */
export interface PtcTool {
  /** The tool's own name (`web_search`). */
  name: string;
  /** Its name under `tools` (`webSearch`). */
  camelName: string;
  tool: StructuredToolInterface;
}

/** The tools exposed for one model turn, by camel-cased name. */
export interface PtcToolView {
  readonly byCamelName: ReadonlyMap<string, PtcTool>;
  /**
   * Every name a tool is reachable by under `tools`: its camel-cased name, and its own name too
   * when that differs and is a plain identifier (`tools.get_stock`, as the prompt shows it).
   */
  readonly byGuestName: ReadonlyMap<string, PtcTool>;
}

/** An own tool name guest code can reach as `tools.<name>` (a host function path segment). */
const ALIAS_NAME = /^[A-Za-z_$][\w$]*$/;
const NOT_ALIASES: ReadonlySet<string> = new Set(["__proto__", "prototype", "constructor"]);

/** One graph-state write requested by a tool's `Command`, as `[channel, value]`. */
export type StateUpdate = [string, unknown];

/** The run config the eval tool receives (LangGraph's ToolNode adds `state` and `toolCallId`). */
export interface EvalRunConfig extends ToolRunnableConfig {
  state?: unknown;
  toolCallId?: string;
}

/**
 * Raised in guest code when an eval exceeds `maxPtcCalls` or a per-tool quota. Guest code can
 * catch it and check `e.name === "PTCCallBudgetExceededError"`.
 */
export class PTCCallBudgetExceededError extends Error {
  override readonly name = "PTCCallBudgetExceededError";
  /** The limit that ran out. */
  readonly limit: number;
  /** The tool whose call was refused (its own name). */
  readonly toolName: string;
  constructor(message: string, limit: number, toolName: string) {
    super(message);
    this.limit = limit;
    this.toolName = toolName;
  }
}

/** Tracks the tool names ever offered to the model, so a misspelt `ptc` name fails loudly once. */
export class PtcResolver {
  readonly #spec: ResolvedPtcSpec;
  readonly #toolName: string;
  readonly #seen = new Set<string>();
  #last: { tools: readonly unknown[]; view: PtcToolView } | undefined;

  constructor(spec: ResolvedPtcSpec, toolName: string) {
    this.#spec = spec;
    this.#toolName = toolName;
  }

  /** True when the options expose any tool at all. */
  get enabled(): boolean {
    const s = this.#spec;
    return s.safe || s.all || s.names.length > 0 || s.instances.length > 0;
  }

  /**
   * The tools guest code may call, given the tools offered to the model in this turn
   * (`request.tools` in `wrapModelCall`). Throws on a camel-case collision, and on a named tool
   * that no model call of this middleware has ever been offered (a typo, most likely).
   */
  resolve(agentTools: readonly unknown[]): PtcToolView {
    if (this.#last !== undefined && sameItems(this.#last.tools, agentTools)) return this.#last.view;
    const view = this.#build(agentTools, true);
    this.#last = { tools: [...agentTools], view };
    return view;
  }

  /** The view of the last model call, or of the tool instances alone before any model call. */
  get latest(): PtcToolView {
    return this.#last?.view ?? this.#build([], false);
  }

  #build(agentTools: readonly unknown[], checkNames: boolean): PtcToolView {
    const spec = this.#spec;
    const candidates = agentTools
      .filter(isToolInstance)
      .filter((t) => t.name !== this.#toolName && t.name !== TASK_TOOL_NAME);
    for (const t of candidates) this.#seen.add(t.name);
    const chosen = new Map<string, StructuredToolInterface>();
    for (const t of candidates) {
      if (spec.all || (spec.safe && SAFE_PTC_TOOL_NAMES.includes(t.name)) || spec.names.includes(t.name))
        chosen.set(t.name, t);
    }
    for (const name of checkNames ? spec.names : []) {
      if (!this.#seen.has(name) && !spec.instances.some((t) => t.name === name)) {
        const offered = candidates.map((t) => t.name).join(", ") || "none";
        throw new Error(
          `createCodeInterpreterMiddleware: ptc names "${name}", which is not a tool of this agent (tools: ${offered})`,
        );
      }
    }
    // Instances given in the options win over an agent tool of the same name.
    for (const t of spec.instances) chosen.set(t.name, t);
    assertNoCamelCollisions(chosen.keys());
    const byCamelName = new Map<string, PtcTool>();
    for (const [name, tool] of chosen)
      byCamelName.set(camelCaseToolName(name), { name, camelName: camelCaseToolName(name), tool });
    const byGuestName = new Map(byCamelName);
    for (const tool of byCamelName.values()) {
      if (!byGuestName.has(tool.name) && ALIAS_NAME.test(tool.name) && !NOT_ALIASES.has(tool.name))
        byGuestName.set(tool.name, tool);
    }
    return { byCamelName, byGuestName };
  }
}

function sameItems(a: readonly unknown[], b: readonly unknown[]): boolean {
  return a.length === b.length && a.every((x, i) => x === b[i]);
}

/** Everything PTC calls of one eval share: budgets, the eval's run config, collected state updates. */
export class PtcEvalContext {
  #config: EvalRunConfig;
  readonly #maxCalls: number | null;
  readonly #quotas: ReadonlyMap<string, number>;
  readonly #perTool = new Map<string, number>();
  readonly #updates: StateUpdate[] = [];
  readonly #evalCallId: string;
  readonly #activity: EvalActivity | undefined;
  readonly #gate: HostCallGate | undefined;
  #calls = 0;
  #state: unknown;

  constructor(
    config: EvalRunConfig,
    limits: { maxPtcCalls: number | null; ptcQuotas: ReadonlyMap<string, number> },
    activity?: EvalActivity,
    gate?: HostCallGate,
  ) {
    this.#config = config;
    this.#activity = activity;
    this.#gate = gate;
    this.#maxCalls = limits.maxPtcCalls;
    this.#quotas = limits.ptcQuotas;
    this.#state = config.state;
    this.#evalCallId = config.toolCall?.id ?? config.toolCallId ?? "eval";
  }

  /**
   * Later calls run under `config` (a paused eval taken over by the run that resumed it), on its
   * graph state with the updates this eval's calls requested so far.
   */
  rebind(config: EvalRunConfig): void {
    this.#config = config;
    this.#state = applyToStateView(config.state, this.#updates);
  }

  /** Calls made so far, over all tools. */
  get calls(): number {
    return this.#calls;
  }

  /** Calls made so far, by tool name. */
  get callsByTool(): ReadonlyMap<string, number> {
    return this.#perTool;
  }

  /** Graph-state writes requested by tools' `Command`s, in call order (never `messages`). */
  get updates(): readonly StateUpdate[] {
    return this.#updates;
  }

  /**
   * Invokes `target` for guest code: validates the argument shape, charges the budgets, runs the
   * tool under the eval's run config (its callbacks make the call a child run), and converts the
   * output. Rejections carry the tool error's class name and message. With a gate (human review),
   * the gate decides whether the tool runs, with which arguments, or is answered from a journal.
   */
  async call(target: PtcTool, args: readonly unknown[], signal: AbortSignal): Promise<unknown> {
    const input = singleObjectArgument(target.camelName, args);
    this.#charge(target);
    const n = this.#calls;
    const config: EvalRunConfig = {
      ...withoutRunIdentity(this.#config),
      // Derived, so traces and tools can tell calls apart and link them to the eval call.
      toolCallId: `${this.#evalCallId}:ptc:${n}`,
      state: this.#state,
      // The host call's signal fires when the eval ends for any reason, its own abort included
      // (the eval runs under the run's signal), so it alone covers both; AbortSignal.any costs ~100 µs.
      signal,
    };
    nameHostCall(target.name, config.toolCallId); // the span and usage of this host call name the tool
    const live = async (toolInput: Record<string, unknown>): Promise<{ value: unknown; updates: StateUpdate[] }> => {
      const progress = this.#activity?.toolStarted(target.name, signal);
      try {
        const converted = toGuestValue(await target.tool.invoke(toolInput, config));
        progress?.end(true);
        return converted;
      } catch (err) {
        progress?.end(false);
        throw guestFacingError(err);
      }
    };
    const { value, updates } =
      this.#gate === undefined
        ? await live(input)
        : await this.#gate.call({ kind: "tool", name: target.name, args: input }, live, () =>
            this.#activity?.countJournaled(target.name),
          );
    if (updates.length > 0) {
      this.#updates.push(...updates);
      this.#state = applyToStateView(this.#state, updates);
    }
    return value;
  }

  #charge({ name: toolName, camelName }: PtcTool): void {
    if (this.#maxCalls !== null && this.#calls >= this.#maxCalls) {
      throw new PTCCallBudgetExceededError(
        `tools.${camelName} was refused: this eval already made ${this.#maxCalls} tool calls, the limit per eval; continue in a new eval call`,
        this.#maxCalls,
        toolName,
      );
    }
    const quota = this.#quotas.get(toolName);
    const used = this.#perTool.get(toolName) ?? 0;
    if (quota !== undefined && used >= quota) {
      throw new PTCCallBudgetExceededError(
        `tools.${camelName} was refused: this eval already made ${quota} calls to ${toolName}, its limit per eval`,
        quota,
        toolName,
      );
    }
    this.#calls++;
    this.#perTool.set(toolName, used + 1);
  }
}

function singleObjectArgument(camelName: string, args: readonly unknown[]): Record<string, unknown> {
  const [input] = args;
  if (args.length === 0 || (args.length === 1 && input === undefined)) return {};
  if (args.length === 1 && typeof input === "object" && input !== null && !Array.isArray(input)) {
    return input as Record<string, unknown>;
  }
  throw new TypeError(`tools.${camelName} takes one object argument, e.g. tools.${camelName}({ ... })`);
}

/** `config` without the eval call's own run id, run name and tool call, for runs it starts. */
export function withoutRunIdentity(config: EvalRunConfig): EvalRunConfig {
  // The eval call's own run id/name and tool call must not be reused by its children.
  const { runId: _runId, runName: _runName, toolCall: _toolCall, ...rest } = config;
  return rest;
}

/** A host-side copy of a tool error: same name (class name when `name` was left as "Error") and message, no host stack. */
export function guestFacingError(err: unknown): Error {
  if (err instanceof Error) {
    const ctorName = err.constructor?.name;
    const name = err.name !== "Error" ? err.name : ctorName && ctorName !== "Object" ? ctorName : "Error";
    const copy = new Error(err.message);
    copy.name = name;
    // Host stack frames name server paths; the guest learns nothing useful from them.
    copy.stack = `${name}: ${err.message}`;
    return copy;
  }
  const copy = new Error(typeof err === "string" ? err : `Tool failed: ${String(err)}`);
  copy.name = "ToolError";
  return copy;
}

interface MessageLike {
  content: unknown;
  status?: unknown;
  getType?: () => string;
}

function isCommandLike(x: unknown): x is { update?: unknown } {
  return (
    typeof x === "object" &&
    x !== null &&
    Object.getPrototypeOf(x) !== Object.prototype &&
    (x as { lg_name?: unknown }).lg_name === "Command"
  );
}

function isMessageLike(x: unknown): x is MessageLike {
  return typeof x === "object" && x !== null && "content" in x && typeof (x as MessageLike).getType === "function";
}

function commandUpdates(update: unknown): StateUpdate[] {
  if (Array.isArray(update)) {
    return update.filter((t): t is StateUpdate => Array.isArray(t) && t.length === 2 && typeof t[0] === "string");
  }
  if (typeof update === "object" && update !== null) return Object.entries(update);
  return [];
}

/**
 * Converts a tool's output for guest code. Plain return values stay typed; a message is unwrapped
 * to its content (a JSON string stays a string); text content blocks become one string; an error `ToolMessage` becomes a rejection; a
 * `Command` yields the content of its ToolMessage as the value and its other updates as state writes
 * (its `messages` are dropped: they answer a tool call the model never made). A list of messages
 * and `Command`s (what a ToolNode accepts from a tool) follows one rule, as both peers do: the value
 * is the content of the last message in it, and every `Command`'s state writes apply, in order.
 */
export function toGuestValue(output: unknown): { value: unknown; updates: StateUpdate[] } {
  const items = isToolOutput(output) ? [output] : isToolOutputList(output) ? output : undefined;
  if (items !== undefined) {
    let last: MessageLike | undefined;
    const updates: StateUpdate[] = [];
    for (const item of items) {
      if (isMessageLike(item)) {
        last = item;
        continue;
      }
      for (const [key, v] of commandUpdates(item.update)) {
        if (key !== "messages") updates.push([key, v]);
        else last = (Array.isArray(v) ? v : [v]).filter(isMessageLike).at(-1) ?? last;
      }
    }
    return { value: last === undefined ? null : unwrapMessage(last), updates };
  }
  // LangChain reads an array of content blocks as message content (deepagents' read_file returns one).
  if (isTextBlockList(output)) return { value: joinText(output), updates: [] };
  return { value: toPlainData(output, new Map()), updates: [] };
}

/** A message or a `Command`. */
function isToolOutput(x: unknown): x is MessageLike | { update?: unknown } {
  return isCommandLike(x) || isMessageLike(x);
}

function isToolOutputList(x: unknown): x is Array<MessageLike | { update?: unknown }> {
  return Array.isArray(x) && x.length > 0 && x.every(isToolOutput);
}

function unwrapMessage(message: MessageLike): unknown {
  const content = message.content;
  const text = isTextBlockList(content) ? joinText(content) : content;
  if (message.status === "error") {
    const err = new Error(typeof text === "string" ? text : JSON.stringify(text));
    err.name = "ToolError";
    throw err;
  }
  return toPlainData(text, new Map());
}

function isTextBlockList(x: unknown): x is { type: "text"; text: string }[] {
  return Array.isArray(x) && x.length > 0 && x.every(isTextBlock);
}

function joinText(blocks: readonly { text: string }[]): string {
  return blocks.map((b) => b.text).join("");
}

function isTextBlock(x: unknown): x is { type: "text"; text: string } {
  return (
    typeof x === "object" &&
    x !== null &&
    (x as { type?: unknown }).type === "text" &&
    typeof (x as { text?: unknown }).text === "string"
  );
}

const PASS_THROUGH: readonly (abstract new (...args: never[]) => unknown)[] = [
  Date,
  RegExp,
  Map,
  Set,
  Error,
  ArrayBuffer,
];

/**
 * Turns class instances (a retriever's `Document`, a message) into plain data the sandbox can
 * copy, keeping shared references and cycles; everything the engine copies natively passes as is.
 */
function toPlainData(value: unknown, seen: Map<object, unknown>): unknown {
  if (typeof value !== "object" || value === null) return value;
  if (seen.has(value)) return seen.get(value);
  if (ArrayBuffer.isView(value) || PASS_THROUGH.some((C) => value instanceof C)) return value;
  if (isMessageLike(value)) return toPlainData(value.content, seen);
  if (Array.isArray(value)) {
    const out: unknown[] = [];
    seen.set(value, out);
    for (let i = 0; i < value.length; i++) if (i in value) out[i] = toPlainData(value[i], seen);
    out.length = value.length;
    return out;
  }
  const proto: unknown = Object.getPrototypeOf(value);
  const source =
    proto !== Object.prototype && proto !== null && typeof (value as { toJSON?: unknown }).toJSON === "function"
      ? (value as { toJSON: () => unknown }).toJSON()
      : value;
  if (source !== value) return toPlainData(source, seen);
  const out: Record<string, unknown> = proto === null ? Object.create(null) : {};
  seen.set(value, out);
  for (const key of Object.keys(value)) {
    const item = toPlainData((value as Record<string, unknown>)[key], seen);
    // Assigning an own "__proto__" key would set the prototype and lose the key.
    if (key === "__proto__")
      Object.defineProperty(out, key, { value: item, writable: true, enumerable: true, configurable: true });
    else out[key] = item;
  }
  return out;
}

/**
 * The state later PTC calls of the same eval see, after earlier calls' updates: objects are merged
 * key by key (a `null` value deletes, as deepagents' `files` reducer does), anything else replaces.
 */
function applyToStateView(state: unknown, updates: readonly StateUpdate[]): unknown {
  if (typeof state !== "object" || state === null) return state;
  const next: Record<string, unknown> = { ...(state as Record<string, unknown>) };
  for (const [key, value] of updates) {
    const current = next[key];
    if (isPlainRecord(current) && isPlainRecord(value)) {
      const merged: Record<string, unknown> = { ...current };
      for (const [k, v] of Object.entries(value)) {
        if (v === null) delete merged[k];
        else merged[k] = v;
      }
      next[key] = merged;
    } else {
      next[key] = value;
    }
  }
  return next;
}

function isPlainRecord(x: unknown): x is Record<string, unknown> {
  if (typeof x !== "object" || x === null || Array.isArray(x)) return false;
  const proto: unknown = Object.getPrototypeOf(x);
  return proto === Object.prototype || proto === null;
}
