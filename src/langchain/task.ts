/**
 * `task()` inside the interpreter: guest code dispatches deepagents subagents through the agent's
 * own `task` tool, with request validation, response-schema limits, typed structured results, a
 * per-session cap on subagents in flight, a per-subagent wall budget, cancellation when the eval
 * ends, and progress events on LangGraph's custom stream.
 */
import type { StructuredToolInterface } from "@langchain/core/tools";
import type { HostCallContext, Sandbox } from "../index.js";
import { INTERPRETER_LIMITS } from "./limits.js";
import { isToolInstance, TASK_TOOL_NAME, type ResolvedOptions } from "./options.js";
import type { SubagentInfo } from "./prompts.js";
import { guestFacingError, toGuestValue, withoutRunIdentity, type EvalRunConfig } from "./ptc.js";
import type { HostCallGate } from "./approval.js";

/** Limits on a `responseSchema`, so a model cannot hand the subagent a schema bomb. */
export const RESPONSE_SCHEMA_LIMITS = INTERPRETER_LIMITS.responseSchema;

/**
 * The run-config key deepagents' task tool reads a dynamic response format from (exported by
 * deepagents as `SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY`; repeated so deepagents stays optional).
 */
export const SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY = "__deepagents_subagent_response_format";

const LABEL_CHARS = 120;

// LangGraph's CONFIG_KEY_ABORT_SIGNALS (internal, not exported from its entry point).
const PREGEL_ABORT_SIGNALS_KEY = "__pregel_abort_signals";

/** The guest's global for subagent calls. */
const TASK_GLOBAL = "task";

/** A validated `task()` request. */
export interface TaskRequest {
  description: string;
  subagentType: string;
  label?: string;
  responseSchema?: Record<string, unknown>;
}

/** The agent's `task` tool and the subagent types it accepts. */
export interface TaskCatalog {
  tool: StructuredToolInterface;
  subagents: readonly SubagentInfo[];
}

/**
 * A progress event written to LangGraph's custom stream (`streamMode: "custom"`) while an eval
 * runs, in the shape of the interpreter's other progress events (`source`, `evalCallId`, `event`).
 */
export interface SubagentProgressEvent {
  source: "code_interpreter";
  /** The eval tool call that dispatched the subagent. */
  evalCallId: string;
  event: "subagent";
  phase: "start" | "complete" | "error";
  /** Sequence number of the `task()` call within its eval, from 1. */
  id: number;
  subagentType: string;
  /** The request's `label`, or else its description, cut to 120 characters. */
  label: string;
  /** Time since the subagent started, ms (complete and error only). */
  durationMs?: number;
  /** The error message (error only). */
  error?: string;
}

/** Where an eval's subagent events and count go (the eval's `EvalActivity`). */
export interface SubagentActivitySink {
  /** Emits one event on the custom stream; adds `source` and `evalCallId`. */
  emit(event: Omit<SubagentProgressEvent, "source" | "evalCallId">): void;
  /** Counts one subagent started from this eval. */
  countSubagentCall(): void;
}

const REQUEST_KEYS: Readonly<Record<string, keyof TaskRequest>> = Object.freeze({
  description: "description",
  subagentType: "subagentType",
  subagent_type: "subagentType",
  label: "label",
  responseSchema: "responseSchema",
  response_schema: "responseSchema",
});

/** The agent's `task` tool among `tools`, if any. */
export function findTaskTool(tools: readonly unknown[]): StructuredToolInterface | undefined {
  return tools.filter(isToolInstance).find((t) => t.name === TASK_TOOL_NAME);
}

/**
 * The subagent types of deepagents' task tool: names from its `subagent_type` field description
 * ("… Available: a, b"), descriptions from its "- name: description" lines.
 */
export function subagentsOf(tool: StructuredToolInterface): SubagentInfo[] {
  const schema = tool.schema as { shape?: Record<string, { description?: unknown }> } | undefined;
  const fieldDescription = schema?.shape?.["subagent_type"]?.description;
  const match = typeof fieldDescription === "string" ? /Available:\s*(.*)$/s.exec(fieldDescription) : null;
  const names =
    match === null
      ? []
      : match[1]!
          .split(",")
          .map((n) => n.trim())
          .filter((n) => n !== "");
  const lines = tool.description.split("\n").map((l) => l.trim());
  return names.map((name) => {
    const line = lines.find((l) => l.startsWith(`- ${name}: `));
    return { name, description: line === undefined ? "" : line.slice(name.length + 4) };
  });
}

function describeValue(value: unknown): string {
  if (typeof value === "string") return JSON.stringify(value.length > 40 ? `${value.slice(0, 40)}…` : value);
  if (value === null || typeof value !== "object") return String(value);
  return Array.isArray(value) ? "an array" : "an object";
}

/** Validates the guest's `task(...)` arguments. Throws a `TypeError` saying what is wrong and what is valid. */
export function parseTaskRequest(args: readonly unknown[], validTypes: readonly string[]): TaskRequest {
  const [input] = args;
  const usage = "task({ description, subagentType, label?, responseSchema? })";
  if (args.length !== 1 || typeof input !== "object" || input === null || Array.isArray(input)) {
    throw new TypeError(`task takes one object argument: ${usage}`);
  }
  const request: Partial<Record<keyof TaskRequest, unknown>> = {};
  for (const [key, value] of Object.entries(input)) {
    const field = REQUEST_KEYS[key];
    if (field === undefined) {
      throw new TypeError(
        `task: unknown key ${JSON.stringify(key)}; valid keys: ${Object.keys(REQUEST_KEYS).join(", ")}`,
      );
    }
    if (request[field] !== undefined) throw new TypeError(`task: ${field} is given twice (camelCase and snake_case)`);
    if (value !== undefined) request[field] = value;
  }
  const { description, subagentType, label, responseSchema } = request;
  if (typeof description !== "string" || description.trim() === "") {
    throw new TypeError(`task: description must be a non-empty string, got ${describeValue(description)}`);
  }
  const valid = validTypes.map((t) => JSON.stringify(t)).join(", ");
  if (typeof subagentType !== "string" || subagentType.trim() === "") {
    throw new TypeError(
      `task: subagentType must be a non-empty string, one of ${valid}; got ${describeValue(subagentType)}`,
    );
  }
  if (!validTypes.includes(subagentType)) {
    throw new TypeError(`task: unknown subagentType ${JSON.stringify(subagentType)}; valid types: ${valid}`);
  }
  if (label !== undefined && typeof label !== "string")
    throw new TypeError(`task: label must be a string, got ${describeValue(label)}`);
  const out: TaskRequest = { description, subagentType };
  if (label !== undefined) out.label = label;
  if (responseSchema !== undefined) out.responseSchema = checkResponseSchema(responseSchema);
  return out;
}

// Keywords whose value is one subschema, a list of subschemas, or a map of name -> subschema.
const SUBSCHEMA_KEYWORDS = new Set([
  "items",
  "additionalProperties",
  "additionalItems",
  "contains",
  "not",
  "if",
  "then",
  "else",
  "propertyNames",
  "unevaluatedItems",
  "unevaluatedProperties",
]);
const SUBSCHEMA_LIST_KEYWORDS = new Set(["anyOf", "oneOf", "allOf", "prefixItems", "items"]);
const SUBSCHEMA_MAP_KEYWORDS = new Set(["properties", "patternProperties", "$defs", "definitions", "dependentSchemas"]);

function childSchemas(schema: Record<string, unknown>): unknown[] {
  const children: unknown[] = [];
  for (const [key, value] of Object.entries(schema)) {
    if (typeof value !== "object" || value === null) continue;
    if (Array.isArray(value)) {
      if (SUBSCHEMA_LIST_KEYWORDS.has(key)) children.push(...value);
    } else if (SUBSCHEMA_MAP_KEYWORDS.has(key)) {
      children.push(...Object.values(value));
    } else if (SUBSCHEMA_KEYWORDS.has(key)) {
      children.push(value);
    }
  }
  return children;
}

/**
 * Checks a `responseSchema` against {@link RESPONSE_SCHEMA_LIMITS} and returns a plain-JSON copy.
 * Depth counts levels of nesting below the root, as the peers do (the root is 0, a property's
 * schema 1, an array's item schema one more): `{ type: "string" }` inside five nested `properties`
 * is depth 5. Properties count every key of every `properties` object.
 */
export function checkResponseSchema(schema: unknown): Record<string, unknown> {
  const { maxBytes, maxDepth, maxProperties } = RESPONSE_SCHEMA_LIMITS;
  if (typeof schema !== "object" || schema === null || Array.isArray(schema)) {
    throw new TypeError(`task: responseSchema must be a JSON Schema object, got ${describeValue(schema)}`);
  }
  let serialized: string | undefined;
  try {
    serialized = JSON.stringify(schema);
  } catch {
    serialized = undefined;
  }
  if (serialized === undefined)
    throw new TypeError("task: responseSchema must be plain JSON (no cycles, BigInts or functions)");
  const bytes = Buffer.byteLength(serialized, "utf8");
  if (bytes > maxBytes)
    throw new RangeError(`task: responseSchema is ${bytes} bytes serialized; the limit is ${maxBytes} bytes`);
  // Walk the parsed copy: it is acyclic and holds only JSON values, whatever the guest passed.
  const copy = JSON.parse(serialized) as Record<string, unknown>;
  let properties = 0;
  let deepest = 0;
  const walk = (node: unknown, depth: number): void => {
    if (typeof node !== "object" || node === null || Array.isArray(node)) return;
    deepest = Math.max(deepest, depth);
    const record = node as Record<string, unknown>;
    const props = record["properties"];
    if (typeof props === "object" && props !== null && !Array.isArray(props)) properties += Object.keys(props).length;
    for (const child of childSchemas(record)) walk(child, depth + 1);
  };
  walk(copy, 0);
  if (deepest > maxDepth)
    throw new RangeError(`task: responseSchema nests schemas ${deepest} levels deep; the depth limit is ${maxDepth}`);
  if (properties > maxProperties) {
    throw new RangeError(
      `task: responseSchema declares ${properties} properties in total; the limit is ${maxProperties}`,
    );
  }
  return copy;
}

/** A counting semaphore with a bounded FIFO queue; waiters leave the queue when their signal fires. */
export class InFlightLimiter {
  readonly #max: number;
  readonly #maxQueued: number;
  readonly #queue: { grant: () => void }[] = [];
  #active = 0;

  constructor(max: number, maxQueued = Number.POSITIVE_INFINITY) {
    this.#max = max;
    this.#maxQueued = maxQueued;
  }

  /** Calls holding a slot now. */
  get active(): number {
    return this.#active;
  }

  /** Calls waiting for a slot. */
  get queued(): number {
    return this.#queue.length;
  }

  /**
   * Resolves once a slot is held; rejects with `signal.reason` if the signal fires first, and with
   * a `RangeError` when the queue is full.
   */
  acquire(signal: AbortSignal): Promise<void> {
    if (signal.aborted) return Promise.reject(signal.reason);
    if (this.#active < this.#max) {
      this.#active++;
      return Promise.resolve();
    }
    if (this.#queue.length >= this.#maxQueued) {
      return Promise.reject(
        new RangeError(
          `task: ${this.#queue.length} subagent calls are already waiting, the limit; await some before starting more`,
        ),
      );
    }
    return new Promise<void>((resolve, reject) => {
      const waiter = {
        grant: () => {
          signal.removeEventListener("abort", onAbort);
          resolve();
        },
      };
      const onAbort = (): void => {
        const i = this.#queue.indexOf(waiter);
        if (i >= 0) this.#queue.splice(i, 1);
        reject(signal.reason);
      };
      signal.addEventListener("abort", onAbort, { once: true });
      this.#queue.push(waiter);
    });
  }

  /** Gives a slot back, handing it straight to the oldest waiter. */
  release(): void {
    const next = this.#queue.shift();
    if (next !== undefined) next.grant();
    else this.#active--;
  }
}

/** Everything `task()` calls of one eval share: its run config, catalog, limiter and activity. */
class TaskEvalScope {
  #config: EvalRunConfig;
  readonly #catalog: TaskCatalog;
  readonly #limiter: InFlightLimiter;
  readonly #timeoutMs: number;
  readonly #sink: SubagentActivitySink;
  readonly #evalCallId: string;
  readonly #gate: HostCallGate | undefined;
  #calls = 0;

  constructor(
    config: EvalRunConfig,
    catalog: TaskCatalog,
    limiter: InFlightLimiter,
    timeoutMs: number,
    sink: SubagentActivitySink,
    gate: HostCallGate | undefined,
  ) {
    this.#config = config;
    this.#gate = gate;
    this.#catalog = catalog;
    this.#limiter = limiter;
    this.#timeoutMs = timeoutMs;
    this.#evalCallId = config.toolCall?.id ?? config.toolCallId ?? "eval";
    this.#sink = sink;
  }

  /** Later calls run under `config`: a paused eval was taken over by the run that resumed it. */
  rebind(config: EvalRunConfig): void {
    this.#config = config;
  }

  async dispatch(args: readonly unknown[], signal: AbortSignal): Promise<unknown> {
    const validTypes = this.#catalog.subagents.map((s) => s.name);
    const request = parseTaskRequest(args, validTypes);
    // Numbered in call order, before the gate: the same id in every replay, journaled calls included.
    const id = ++this.#calls;
    if (this.#gate === undefined) return this.#run(request, id, signal);
    // Reviewed and journaled like the task tool itself: its arguments are description and subagent_type.
    const reviewArgs: Record<string, unknown> = {
      description: request.description,
      subagent_type: request.subagentType,
    };
    if (request.label !== undefined) reviewArgs["label"] = request.label;
    if (request.responseSchema !== undefined) reviewArgs["response_schema"] = request.responseSchema;
    const answer = await this.#gate.call(
      { kind: "task", name: TASK_TOOL_NAME, args: reviewArgs },
      async (edited) => ({ value: await this.#run(parseTaskRequest([edited], validTypes), id, signal), updates: [] }),
      () => this.#sink.countSubagentCall(),
    );
    return answer.value;
  }

  async #run(request: TaskRequest, id: number, signal: AbortSignal): Promise<unknown> {
    // Queued calls leave the queue when the eval ends: the host signal fires then.
    await this.#limiter.acquire(signal);
    const started = performance.now();
    // Guest text, bounded: it reaches UIs and trace names.
    const label = (request.label ?? request.description).slice(0, LABEL_CHARS);
    const base = { event: "subagent" as const, id, subagentType: request.subagentType, label };
    try {
      this.#sink.countSubagentCall();
      this.#sink.emit({ ...base, phase: "start" });
      const deadline = AbortSignal.timeout(this.#timeoutMs);
      let output: unknown;
      try {
        output = await this.#catalog.tool.invoke(
          { description: request.description, subagent_type: request.subagentType },
          this.#subagentConfig(request, id, label, AbortSignal.any([signal, deadline])),
        );
      } catch (err) {
        if (deadline.aborted && !signal.aborted) {
          throw new Error(`did not finish within ${this.#timeoutMs} ms (subagentTimeoutMs)`);
        }
        throw err;
      }
      const value = decodeOutput(output, request.responseSchema !== undefined);
      this.#sink.emit({ ...base, phase: "complete", durationMs: Math.round(performance.now() - started) });
      return value;
    } catch (err) {
      const error = subagentError(request.subagentType, err);
      this.#sink.emit({
        ...base,
        phase: "error",
        durationMs: Math.round(performance.now() - started),
        error: error.message,
      });
      throw error;
    } finally {
      this.#limiter.release();
    }
  }

  #subagentConfig(request: TaskRequest, id: number, label: string, signal: AbortSignal): EvalRunConfig {
    const { configurable, ...rest } = withoutRunIdentity(this.#config);
    // LangGraph lets a nested graph inherit the parent's abort signals from this key in preference
    // to `signal`; dropped, the subagent honours its own signal (the eval's end, its deadline).
    const { [PREGEL_ABORT_SIGNALS_KEY]: _parentSignals, ...inherited } = (configurable ?? {}) as Record<
      string,
      unknown
    >;
    const toolCallId = `${this.#evalCallId}:task:${id}`;
    return {
      ...rest,
      toolCallId,
      // As a model's call would: deepagents then answers with the subagent's last non-empty AI
      // message (its direct-invoke branch takes the last message, "Task completed" when empty).
      toolCall: {
        id: toolCallId,
        name: this.#catalog.tool.name,
        args: { description: request.description, subagent_type: request.subagentType },
        type: "tool_call",
      },
      ...(request.label === undefined ? {} : { runName: `task:${label}` }),
      configurable: {
        ...inherited,
        // Always set, so a schema of an outer task() never leaks into a schemaless inner one.
        [SUBAGENT_RESPONSE_FORMAT_CONFIG_KEY]: request.responseSchema,
      },
      signal,
    };
  }
}

/** The subagent's answer for guest code: parsed JSON with a schema, text without. */
function decodeOutput(output: unknown, structured: boolean): unknown {
  const { value } = toGuestValue(output);
  if (!structured || typeof value !== "string") return value;
  try {
    return JSON.parse(value) as unknown;
  } catch {
    throw new Error(`returned text instead of a value matching responseSchema: ${value.slice(0, 200)}`);
  }
}

// LangGraph's interrupt errors (`interrupt()`, human-in-the-loop approval), by their stable names.
const INTERRUPT_ERROR_NAMES: ReadonlySet<string> = new Set(["GraphInterrupt", "NodeInterrupt"]);

function subagentError(subagentType: string, err: unknown): Error {
  const inner = guestFacingError(err);
  // An eval cannot pause for a human: say so instead of showing LangGraph's internal error.
  const reason = INTERRUPT_ERROR_NAMES.has(inner.name)
    ? "it asked for human input (an interrupt, e.g. interruptOn approval), which a subagent started from code cannot wait for; call the task tool directly for this one"
    : inner.message;
  const error = new Error(`Subagent "${subagentType}" failed: ${reason}`);
  error.name = "SubagentError";
  error.stack = `${error.name}: ${error.message}`;
  return error;
}

/** A sandbox session as `task()` sees it: any object identifying it (the interpreter session). */
type SessionKey = object;

/**
 * `task()` for one middleware instance: finds the agent's task tool per turn, installs the frozen
 * global in sandboxes, and routes each call to the eval running in that session.
 */
export class TaskDispatcher {
  readonly #enabled: boolean;
  readonly #timeoutMs: number;
  readonly #installed = new WeakSet<Sandbox>();
  readonly #catalogs = new WeakMap<SessionKey, TaskCatalog | undefined>();
  readonly #active = new WeakMap<SessionKey, TaskEvalScope>();
  readonly #limiters = new WeakMap<SessionKey, InFlightLimiter>();
  #latest: TaskCatalog | undefined;
  #lastTool: StructuredToolInterface | undefined;

  constructor(options: Pick<ResolvedOptions, "subagents" | "subagentTimeoutMs">) {
    this.#enabled = options.subagents;
    this.#timeoutMs = options.subagentTimeoutMs;
  }

  /**
   * Records the tools offered in a model turn; returns the catalog when `task()` is available.
   * Pass the session when one exists, so its next eval uses this turn's task tool.
   */
  observe(tools: readonly unknown[], session?: SessionKey): TaskCatalog | undefined {
    if (!this.#enabled) return undefined;
    const tool = findTaskTool(tools);
    if (tool !== this.#lastTool) {
      this.#lastTool = tool;
      this.#latest = tool === undefined ? undefined : { tool, subagents: subagentsOf(tool) };
    }
    if (session !== undefined) this.#catalogs.set(session, this.#latest);
    return this.#latest;
  }

  /** The catalog an eval of `session` uses, if `task()` is available to it. */
  catalogFor(session: SessionKey): TaskCatalog | undefined {
    if (!this.#enabled) return undefined;
    return this.#catalogs.has(session) ? this.#catalogs.get(session) : this.#latest;
  }

  /**
   * Prepares an eval: installs `task` in the sandbox (once) and routes its calls to this eval
   * (through `gate` when calls are reviewed and journaled).
   * Returns the eval's wall budget, extended by the subagent budget, `end` to call when the eval is
   * over and `rebind` to run later calls under another run config; `undefined` when `task()` is
   * not available.
   */
  begin(
    session: SessionKey,
    sandbox: Sandbox,
    config: EvalRunConfig,
    wallTimeoutMs: number,
    activity: SubagentActivitySink,
    gate?: HostCallGate,
  ): { wallTimeoutMs: number; end: () => void; rebind: (config: EvalRunConfig) => void } | undefined {
    const catalog = this.catalogFor(session);
    if (catalog === undefined) return undefined;
    this.#install(session, sandbox);
    let limiter = this.#limiters.get(session);
    if (limiter === undefined) {
      limiter = new InFlightLimiter(INTERPRETER_LIMITS.subagentsInFlight, INTERPRETER_LIMITS.subagentsQueued);
      this.#limiters.set(session, limiter);
    }
    const scope = new TaskEvalScope(config, catalog, limiter, this.#timeoutMs, activity, gate);
    this.#active.set(session, scope);
    return {
      wallTimeoutMs: wallTimeoutMs + this.#timeoutMs,
      rebind: (next) => scope.rebind(next),
      end: () => {
        if (this.#active.get(session) === scope) this.#active.delete(session);
      },
    };
  }

  #install(session: SessionKey, sandbox: Sandbox): void {
    if (this.#installed.has(sandbox)) return;
    // Guest code must not replace or wrap `task` for later evals: a frozen, non-configurable global.
    // A global the guest already made non-configurable (`var task` before subagents were offered)
    // wins, and that guest keeps its own `task`.
    try {
      sandbox.defineFrozenAsyncFunction(TASK_GLOBAL, (args: unknown[], { signal }: HostCallContext) => {
        const scope = this.#active.get(session);
        if (scope === undefined) throw new Error("task() is not available in this eval");
        return scope.dispatch(args, signal);
      });
    } catch {
      // BUSY or DISPOSED: the eval about to run in this sandbox reports that itself.
    }
    this.#installed.add(sandbox);
  }
}
