/**
 * Every sentence the model reads, in one place: the system-prompt sections, the eval tool's
 * description and field descriptions, and the fixed phrases of the eval output.
 *
 * Each claim here must be true of this implementation for the options it is rendered with; the
 * golden files in test/langchain/golden/ show every variant. Sections are separated by one blank
 * line.
 */
import type { SandboxErrorCode } from "../index.js";
import { INTERPRETER_LIMITS } from "./limits.js";
import type { EvalOutcomeMetadata, KeptOutput } from "./outcome.js";
import { camelCaseToolName, renderToolSignatures, type ToolSignatureInput } from "./signatures.js";

export { camelCaseToolName, renderToolSignatures };
export type { JSONSchema, JSONSchemaObject, ToolSignatureInput } from "./signatures.js";

/** How long interpreter state lives. */
export type PromptMode = "thread" | "turn" | "call";

/** A tool exposed as `tools.<camelName>` inside the interpreter. */
export interface PtcToolInfo extends ToolSignatureInput {
  /** Calls of this tool allowed per eval, when a per-tool quota is set. */
  quota?: number;
  /** Calls of this tool pause for human review (`interruptOn`). */
  reviewed?: boolean;
}

/** A subagent type `task()` can dispatch to. */
export interface SubagentInfo {
  name: string;
  description: string;
}

/** Limits as the model should know them. */
export interface PromptLimits {
  memoryLimitBytes: number;
  /** Guest execution time per eval, excluding time spent awaiting tools and subagents. */
  executionTimeoutMs: number;
  /** Wall-clock time per eval, including awaits. */
  wallTimeoutMs: number;
  maxResultChars: number;
  /** `tools.*` calls per eval; `null` = unlimited. */
  maxPtcCalls: number | null;
}

/** Everything the rendered texts depend on. */
export interface PromptInput {
  mode: PromptMode;
  /** The eval tool's name. */
  toolName: string;
  limits: PromptLimits;
  captureConsole: boolean;
  /** Whether cut output is kept in full under a path named in the output. Default true. */
  keepsFullOutput?: boolean;
  /** Tools reachable as `tools.*`; empty when programmatic tool calling is off. */
  ptcTools: readonly PtcToolInfo[];
  /** Whether the `task()` global is installed. */
  taskAvailable: boolean;
  /** Whether `task()` calls pause for human review (`interruptOn.task`). */
  taskReviewed?: boolean;
  /** `real`: the host clock; `frozen`: fixed for the duration of each eval; `host`: supplied by the application. */
  clock: "real" | "frozen" | "host";
  /** Whether `Math.random()` is seeded (reproducible). */
  randomSeeded: boolean;
  /** Subagent types `task()` accepts, for the task section. */
  subagents?: readonly SubagentInfo[];
  /** Wall-clock budget of each subagent, ms, when known. */
  subagentTimeoutMs?: number;
}

const SCHEMA = INTERPRETER_LIMITS.responseSchema;

/** The interpreter's system-prompt text: interpreter section, then `tools` and `task()` sections when available. */
export function renderSystemPrompt(input: PromptInput): string {
  const sections = [renderInterpreterSection(input)];
  if (input.ptcTools.length > 0) sections.push(renderPtcSection(input));
  if (input.taskAvailable) sections.push(renderTaskSection(input));
  return sections.join("\n\n");
}

/** The interpreter section alone (what a user's `systemPrompt` string replaces). */
export function renderInterpreterSection(input: PromptInput): string {
  const { toolName, limits } = input;
  return [
    `## Code interpreter: the \`${toolName}\` tool`,
    "",
    `\`${toolName}\` runs JavaScript or TypeScript in a sandboxed QuickJS interpreter (modern JavaScript, ES2023). It is not Node.js or a browser: there is no \`require\`, \`import\`, \`process\`, \`fetch\`, file system or network${input.ptcTools.length > 0 ? " except through the `tools` described below" : ""}.`,
    "",
    `- **Result**: the value of the last expression statement is the result, as in a REPL. End with the value you want, e.g. \`summary\` or \`({ count, top })\` (parenthesize object literals). Do not use a top-level \`return\`. Top-level \`await\` works.`,
    "- **TypeScript**: type annotations, interfaces, generics, `as`, `satisfies`, `!`, `enum` and `namespace` are accepted; types are stripped, never checked.",
    `- **State**: ${STATE_TEXT[input.mode]}`,
    `- **Limits per call**: ${formatBytes(limits.memoryLimitBytes)} of memory; ${formatMs(limits.executionTimeoutMs)} of execution time (time spent waiting for tools or subagents does not count); ${formatMs(limits.wallTimeoutMs)} in total. A call that exceeds a limit is stopped with an error.`,
    `- **Output**: ${input.captureConsole ? "`console.log`/`info`/`debug`/`warn`/`error` lines are shown first (warnings and errors marked), then the result or the error." : "`console` exists but its output is discarded: put everything you need into the result."} Strings are shown as they are; other values the way Node's \`util.inspect\` shows them (\`10n\`, \`Map(1) { 'a' => 1 }\`), functions as \`[Function f]\`. The whole reply is limited to ${limits.maxResultChars.toLocaleString("en-US")} characters; longer text keeps its head and tail${input.keepsFullOutput === false ? "" : ", and the full text is saved at a path named in the reply"}, so return summaries, not bulk data. The reply ends with a \`<status>\` line: how the call ended, the tool calls it made and how long it took.`,
    `- **Errors**: an uncaught error shows as \`Name: message\`, followed by its stack trace when there is one (line numbers refer to your code).`,
    `- **Time and randomness**: ${CLOCK_TEXT[input.clock]} ${input.randomSeeded ? "`Math.random()` is seeded: the same sequence every time, not for secrets." : "`Math.random()` is not cryptographically secure."}`,
  ].join("\n");
}

const STATE_TEXT: Record<PromptMode, string> = {
  thread:
    "top-level declarations (`const`, `let`, `var`, `function`, `class`) persist across calls in this conversation, also in later turns, so reuse variables instead of recomputing or retyping data. A later call may re-declare a name. Values that cannot be saved between turns (promises, symbols, proxies, WeakMaps, generators, functions that close over local variables) may be lost when the conversation resumes; the output then names them. Pass `reset: true` to start from a fresh interpreter.",
  turn: "top-level declarations (`const`, `let`, `var`, `function`, `class`) persist across calls until you reply to the user; the next turn starts with a fresh interpreter. A later call may re-declare a name. Pass `reset: true` to start from a fresh interpreter.",
  call: "every call starts with a fresh interpreter; nothing persists between calls. Do each step's whole job in one program.",
};

const CLOCK_TEXT: Record<PromptInput["clock"], string> = {
  real: "`Date` reads the real clock.",
  frozen:
    "The clock is frozen during each call: `Date.now()` returns the same time (when the call started) until the call ends.",
  host: "`Date` reads a clock supplied by the application, which may differ from real time.",
};

/** The `tools` API reference and the rules of programmatic tool calling. */
export function renderPtcSection(input: PromptInput): string {
  const { ptcTools, limits } = input;
  const quotas = ptcTools
    .filter((tool) => tool.quota !== undefined)
    .map((tool) => `\`tools.${tool.camelName}\` ${tool.quota} ${tool.quota === 1 ? "call" : "calls"}`);
  const budget =
    limits.maxPtcCalls === null
      ? "There is no limit on the number of `tools` calls per program."
      : `At most ${limits.maxPtcCalls} \`tools\` calls per program; one more throws a catchable \`PTCCallBudgetExceededError\`.`;
  return [
    "## Calling tools from code",
    "",
    `Inside \`${input.toolName}\`, the global \`tools\` calls the tools below. Their results come back to your program, not into this conversation: loop over them, filter and combine them, and end with only what you need to see.`,
    "",
    "```ts",
    renderToolSignatures(ptcTools),
    "```",
    "",
    "- Every `tools.*` call returns a promise: always `await` it. Run independent calls at the same time with `await Promise.all([...])`.",
    "- Pass exactly one object argument, shaped like the signature. Invalid input throws an `Error` with the validation message.",
    "- Results are JavaScript values: structured results arrive as objects and arrays (no `JSON.parse` needed); text results arrive as strings.",
    "- Chain dependent calls inside one program instead of making one tool call per step, and end with an expression holding the final value.",
    "- A failing tool throws an `Error` with the tool's error name and message; use `try`/`catch` or `Promise.allSettled` to continue past failures.",
    `- ${budget}${quotas.length > 0 ? ` Per-tool limits per program: ${quotas.join(", ")}.` : ""}`,
    reviewText(input) ??
      "- `tools` calls run inside an already-approved interpreter call, so they skip any human approval (`interruptOn`) that calling those tools directly would need. Never use them to get around an approval: when an action needs the user's consent, call the tool directly.",
  ].join("\n");
}

/**
 * The rule of reviewed calls (approval.ts): the program pauses there and is run again from its
 * start, earlier calls answered from a record, so it must repeat the same calls.
 */
function reviewText(input: PromptInput): string | undefined {
  const names = input.ptcTools.filter((tool) => tool.reviewed === true).map((tool) => `\`tools.${tool.camelName}\``);
  if (input.taskAvailable && input.taskReviewed === true) names.push("`task()`");
  if (names.length === 0) return undefined;
  return `- **Reviewed calls**: ${names.join(", ")} ${names.length === 1 ? "waits" : "wait"} for a human to approve, edit or reject the call. The program pauses there; once the human answers, it runs again from its start, and every call it made before the pause is answered from a record instead of running again. So a program that makes a reviewed call must make the same calls with the same arguments when run again: derive them from your code, earlier results${input.clock === "real" ? " and `Math.random()` (it repeats exactly; `Date` does not)" : ", `Date` and `Math.random()` (both repeat exactly)"}, and \`await\` each reviewed call. A program that calls something else when run again is stopped with \`ReplayDivergenceError\`. A rejected call throws \`ToolCallRejectedError\` with the reviewer's message; catch it to continue without that call.`;
}

/** The "dispatching subagents with `task`" section. */
export function renderTaskSection(input: PromptInput): string {
  const subagents = input.subagents ?? [];
  const example = subagents[0]?.name ?? "general-purpose";
  const inFlight = INTERPRETER_LIMITS.subagentsInFlight;
  const types =
    subagents.length === 0
      ? []
      : [
          "",
          "Subagent types:",
          ...subagents.map((agent) => `- \`${agent.name}\`: ${agent.description.trim().replace(/\s*\n\s*/g, " ")}`),
        ];
  return [
    "## Dispatching subagents with `task`",
    "",
    `Inside \`${input.toolName}\`, \`task({ description, subagentType, label?, responseSchema? })\` starts a subagent and returns a promise of its answer. Use it to fan work out over many items (review every file, classify every ticket, verify every finding) with the loop in code. When the user asks for a workflow, or a job spans many independent items, write it as one program that dispatches subagents rather than calling them one by one.`,
    ...types,
    "",
    "```js",
    "const results = [];",
    "for (let i = 0; i < items.length; i += 10) {",
    "  const batch = items.slice(i, i + 10);",
    "  results.push(...(await Promise.all(batch.map((item) => task({",
    "    description: `Check ${item.path} for unsafe SQL. Read the file yourself.`,",
    `    subagentType: ${JSON.stringify(example)},`,
    "    label: item.path,",
    '    responseSchema: { type: "object", properties: { unsafe: { type: "boolean" }, reason: { type: "string" } }, required: ["unsafe", "reason"] },',
    "  })))));",
    "}",
    "results.filter((r) => r.unsafe)",
    "```",
    "",
    "- **Explore first**: look at the data with a small program before fanning out, so the subagents get precise instructions.",
    "- **Locators, not payloads**: give each subagent a path, id or URL to read, not the content itself.",
    `- **Always set \`responseSchema\` when results feed later code**: the promise then resolves to a value of that shape (no \`JSON.parse\`). Without it the answer is text. Schemas are limited to ${SCHEMA.maxBytes} bytes, depth ${SCHEMA.maxDepth} and ${SCHEMA.maxProperties} properties.`,
    `- **Batches of about 10**: use \`Promise.all\` over slices as above. At most ${inFlight} subagents run at once; more are queued, not failed.`,
    "- **Return the last expression**: end with the filtered or summarized result, not every answer.",
    ...(input.mode === "call"
      ? []
      : [
          "- **Reuse variables from earlier calls**: results stored in top-level variables are still there; do not dispatch the same work twice.",
        ]),
    `- Time spent waiting for subagents does not count as execution time, and \`task\` calls do not count toward the \`tools\` call limit.${input.subagentTimeoutMs === undefined ? "" : ` Each subagent may run for up to ${formatMs(input.subagentTimeoutMs)}, and a call that uses \`task\` gets that much extra time in total.`} When the interpreter call ends (error, time limit, abort), its running subagents are cancelled.`,
    "- A failed subagent rejects with an `Error` naming its type; catch it or use `Promise.allSettled`.",
    input.taskReviewed === true
      ? input.ptcTools.length > 0
        ? "- Each `task` call waits for a human to approve it first: see **Reviewed calls** above."
        : reviewText(input)!
      : "- Subagents started from code run inside an already-approved interpreter call and skip the human approval (`interruptOn`) that a direct `task` call may need.",
  ].join("\n");
}

/** The eval tool's description: what it does and what persists, in brief (the system prompt has the details). */
export function renderToolDescription(input: PromptInput): string {
  const extras: string[] = [];
  if (input.ptcTools.length > 0)
    extras.push(
      `Call tools from code with \`await tools.<name>(input)\` (${input.ptcTools.map((tool) => `\`${tool.camelName}\``).join(", ")}).`,
    );
  if (input.taskAvailable)
    extras.push("Dispatch subagents with `await task({ description, subagentType, responseSchema })`.");
  return [
    "Runs JavaScript or TypeScript in a sandboxed QuickJS interpreter (no Node.js APIs, no network) and returns the console output and the value of the last expression. Top-level `await` works.",
    TOOL_STATE_TEXT[input.mode],
    ...extras,
    `Limits per call: ${formatBytes(input.limits.memoryLimitBytes)} memory, ${formatMs(input.limits.executionTimeoutMs)} execution time; output is cut to ${input.limits.maxResultChars.toLocaleString("en-US")} characters.`,
  ].join(" ");
}

const TOOL_STATE_TEXT: Record<PromptMode, string> = {
  thread: "Top-level variables, functions and classes persist across calls in this conversation, also in later turns.",
  turn: "Top-level variables, functions and classes persist across calls until you reply to the user.",
  call: "Every call starts fresh: nothing persists between calls.",
};

/** Descriptions of the eval tool's input fields. */
export const EVAL_INPUT_DESCRIPTIONS = Object.freeze({
  code: "JavaScript or TypeScript to run. The value of the last expression statement is the result; top-level await works.",
  reset:
    "Start from a fresh interpreter: drop every variable, function and class from earlier calls before running the code.",
});

const ERROR_LABELS: Record<SandboxErrorCode, string> = {
  SYNTAX_ERROR: "SyntaxError",
  GUEST_ERROR: "Error",
  TIMEOUT: "TimeoutError",
  OUT_OF_MEMORY: "OutOfMemoryError",
  STACK_OVERFLOW: "StackOverflowError",
  ABORTED: "AbortError",
  DISPOSED: "InterpreterClosedError",
  BUSY: "InterpreterBusyError",
  BROKEN: "InterpreterBrokenError",
  WORKER_LOST: "InterpreterLostError",
  UNSERIALIZABLE: "UnserializableResultError",
  COPY_LIMIT: "CopyLimitError",
  HOST_CALL_LIMIT: "HostCallLimitError",
  INVALID_ARGUMENT: "InvalidArgumentError",
  INVALID_SNAPSHOT: "InvalidSnapshotError",
};

/** Fixed phrases of the eval output (see format.ts). */
export const OUTPUT_TEXT = Object.freeze({
  /** Marker placed where the middle of an oversized part was cut, naming where the full text is when it was kept. */
  truncated: (omittedChars: number, kept?: KeptOutput): string =>
    `\n… [${omittedChars.toLocaleString("en-US")} characters omitted${kept === undefined ? "" : `; ${keptText(kept)}`}] …\n`,
  /** The same marker, shorter, for a small `maxResultChars`: where the full text is, tersely. */
  truncatedCompact: (omittedChars: number, kept: KeptOutput): string =>
    `\n… [${omittedChars.toLocaleString("en-US")} omitted; full text: ${kept.store === "files" ? `read_file ${kept.path}` : `readOutput(${JSON.stringify(kept.path)})`}] …\n`,
  /** The shortest marker, when nothing longer fits. */
  truncatedBrief: (omittedChars: number): string => `\n… [${omittedChars.toLocaleString("en-US")} cut] …\n`,
  /** Error thrown by `readOutput` for a path the store does not hold (never kept, or evicted). */
  noKeptOutput: (path: string): string =>
    `No kept output at ${JSON.stringify(path)}: it was never kept or was dropped to make room for newer ones`,
  /** The one-line outcome closing every eval output. */
  outcome: (meta: EvalOutcomeMetadata): string => {
    const tools = Object.entries(meta.toolCalls);
    const calls =
      tools.length === 0
        ? "no tool calls"
        : `tool calls: ${tools.map(([name, count]) => `${name} ×${count}`).join(", ")}`;
    const subagents = meta.subagentCalls === 0 ? "" : `; subagents: ${meta.subagentCalls}`;
    return `${meta.status}; ${calls}${subagents}; ${formatMs(meta.executionMs)} execution, ${formatMs(meta.wallMs)} wall`;
  },
  /** Last console line when the sandbox stopped keeping console output. */
  consoleTruncated: "[console output beyond the interpreter's limit was dropped]",
  /** Name shown for an engine error that is not a guest exception. */
  errorLabel: (code: SandboxErrorCode): string => ERROR_LABELS[code] ?? "Error",
  /** The eval tool was called with arguments that do not fit its schema. */
  badEvalInput: (problem: string): string =>
    `the ${"`code`"} argument must be a string of JavaScript or TypeScript (optional ${"`reset`"}: boolean); ${problem}`,
  /** A tool called from an eval called the eval tool of the same thread. */
  evalReentered:
    "this thread's interpreter is running the eval that called this tool; a tool cannot run code in its own thread's interpreter",
  /** The model's code exceeds `maxCodeBytes`. */
  codeTooLarge: (bytes: number, maxBytes: number): string =>
    `the code is ${bytes.toLocaleString("en-US")} bytes; the limit is ${maxBytes.toLocaleString("en-US")} bytes. Load bulk data through tools or files instead of pasting it into code, or split the work into several evals.`,

  /** A thrown value that is not an Error (`throw "x"`). */
  thrownNonError: (type: string, shown: string): string => `Uncaught ${type} (not an Error): ${shown}`,
});

function keptText(kept: KeptOutput): string {
  const size = `${kept.chars.toLocaleString("en-US")} characters`;
  const what = kept.complete ? `full text (${size})` : `first ${size} of the text`;
  return kept.store === "files"
    ? `${what} saved to ${kept.path}; page through it with read_file`
    : `${what} kept as ${JSON.stringify(kept.path)}; in code, readOutput(${JSON.stringify(kept.path)}) returns it as a string`;
}

/**
 * Hints appended to an eval's output when it matches a known mistake. Each is one or two short,
 * deterministic sentences that say what happened and what to write instead.
 */
export const HINT_TEXT = Object.freeze({
  /** `JSON.parse` was given an object, which it turned into the text "[object Object]". */
  jsonParseObject:
    '`JSON.parse` was given a value that is already an object (it became the text "[object Object]"). Tool results arrive as JavaScript values: use them directly, without `JSON.parse`.',
  /** The final value is a promise that can never settle (a final promise is awaited; this one waited on nothing left to run). */
  unawaitedPromise:
    "The result is a promise that can never settle: nothing it waits for is still running (no tool call, no pending callback). Make sure every path resolves or rejects it, and `await` the calls it depends on (`await tools.x({...})`, `await Promise.all([...])`).",
  /** `tools.x` was called with something other than one object. */
  toolNonObject: (camelName: string, fields: readonly string[]): string =>
    `Call \`tools.${camelName}\` with one object holding its input fields: \`tools.${camelName}({ ${fields.length === 0 ? "..." : fields.map((f) => `${f}: ...`).join(", ")} })\`.`,
  /** `tools.x` named no tool of this eval: the closest tool names. */
  unknownTool: (missing: string, closest: readonly string[]): string =>
    `\`tools.${missing}\` is not a tool. The closest ${closest.length === 1 ? "tool is" : "tools are"} ${closest.map((name) => `\`tools.${name}\``).join(", ")}.`,
  /** A ReferenceError for a name that exists under another spelling. */
  similarName: (missing: string, existing: string): string =>
    `\`${missing}\` does not exist, but \`${existing}\` does: did you mean \`${existing}\`?`,
  /** `f<string>(x)` in otherwise valid JavaScript ran as the comparisons `f < string > (x)`. */
  typeArgumentsAsComparisons: (typeName: string): string =>
    `\`${typeName}\` was read as a variable: code that is valid JavaScript runs as JavaScript, where \`f<${typeName}>(x)\` means \`(f < ${typeName}) > (x)\`. Leave out the type arguments (\`new Set(items)\`), or give the value a type where it is declared (\`const s: Set<${typeName}> = new Set(items)\`).`,
  /** The wall-clock limit ran out while the program waited for tools. */
  toolTimeout: (tools: readonly string[], wallMs: number): string =>
    `The ${formatMs(wallMs)} time limit ran out while the program was waiting for ${tools.map((t) => `\`${t}\``).join(", ")}, not computing. Make fewer or smaller tool calls per program (continue in another call), and run independent calls together with \`Promise.all\`.`,
});

function formatBytes(bytes: number): string {
  const mib = bytes / (1024 * 1024);
  if (mib >= 1) return `${Number.isInteger(mib) ? mib : mib.toFixed(1)} MiB`;
  return `${Math.round(bytes / 1024)} KiB`;
}

function formatMs(ms: number): string {
  if (ms >= 1000 && ms % 1000 === 0) return `${ms / 1000} s`;
  if (ms >= 1000) return `${(ms / 1000).toFixed(1)} s`;
  return `${ms} ms`;
}

/** One-line notices about saved interpreter state (see persistence.ts), shown first in the next eval output. */
export const PERSISTENCE_TEXT = Object.freeze({
  /** Some globals came back as placeholders that throw when read. */
  notRestored: (names: readonly string[]): string =>
    `Restored the interpreter state, but these values could not be saved and now throw when read: ${names.slice(0, 20).join(", ")}${names.length > 20 ? `, and ${names.length - 20} more` : ""}. Re-create them if you need them.`,
  /** A stored or rollback snapshot could not be restored. */
  restoreFailed: (what: "stored" | "rollback", reason: string): string =>
    `The ${what === "stored" ? "saved interpreter state from earlier turns" : "interpreter state to roll back to"} could not be restored (${reason}): the interpreter started fresh, and every variable, function and class defined before is gone.`,
  /** The state could not be saved at the end of a run. */
  notStored: (reason: string): string =>
    `The interpreter state was not saved at the end of the last turn (${reason}): it may be lost when the conversation resumes elsewhere. Free large variables (set them to null) so it can be saved again.`,
  /** The thread's sandbox was closed between evals of a run and came back from the start-of-run state. */
  evicted: (reason: "idle" | "capacity"): string =>
    `The interpreter was closed between calls (${reason === "idle" ? "unused for too long" : "too many conversations at once"}) and restored from the state saved at the end of the last turn: changes made earlier in this turn are lost.`,
  /** A stopped eval was undone. */
  rolledBack: (code: string): string =>
    `Because this call was stopped (${code}), the interpreter was rolled back to its state after the last call that completed: changes made by this call are undone.`,
  /** A stopped eval with no earlier good state to go back to. */
  rolledBackFresh: (code: string): string =>
    `Because this call was stopped (${code}) and no earlier call completed, the interpreter starts fresh: changes made by this call are undone.`,
});

/** What the model reads about durable evals: resumed after a crash, refused or stopped by a drain (call-journal.ts). */
export const DURABLE_TEXT = Object.freeze({
  /** The journal of an eval resumed after its process died is unusable. */
  noJournal: (reason: string): string =>
    `DurableEvalError: this eval was interrupted (its process stopped) and cannot be resumed (${reason}). Nothing ran again; call the tool again in a new eval if it is still needed.`,
  /** The journal could not be written: the eval stops before its next call. */
  notJournaled: (reason: string): string =>
    `the eval's calls can no longer be journaled (${reason}); it was stopped before its next call so that no call runs twice after a crash`,
  /** An eval started on a server that is draining. */
  draining:
    "DurableEvalError: this server is shutting down and takes no new evals; run the same code again (it will run on another server).",
});

/** What the model and the reviewer read about reviewed calls from code (see approval.ts). */
export const APPROVAL_TEXT = Object.freeze({
  /** Message of the guest error when the reviewer rejected a call without a message of their own. */
  rejected: (tool: string): string => `The reviewer rejected this call to ${tool}`,
  /** A reviewed call that cannot pause the eval. */
  unavailable: (reason: string): string => `This call needs human review, but the eval cannot pause for it: ${reason}`,
  /** The pause could not be stored, so the eval was stopped without asking. */
  notPaused: (reason: string): string =>
    `ApprovalError: this eval reached a call that needs human review but could not pause for it (${reason}). The eval was stopped before that call; nothing after it ran.`,
  /** The journal of a resumed eval is missing or unusable. */
  noJournal: (reason: string): string =>
    `ApprovalError: the review was answered, but the paused eval cannot be resumed (${reason}). Nothing ran again; call the tool again in a new eval if it is still needed.`,
  /** A resumed eval made another call than the journal holds at that position. */
  diverged: (
    position: number,
    expected: { name: string; args: unknown },
    actual: { name: string; args: unknown },
  ): string =>
    `the resumed eval did not repeat its first run: call #${position + 1} was ${actual.name}(${briefArgs(actual.args)}) but the first run called ${expected.name}(${briefArgs(expected.args)}). The eval was stopped there; nothing ran twice. Code that pauses for review must make the same calls with the same arguments when run again.`,
  /** A resumed eval ended without reaching the paused call. */
  endedEarly: (tool: string): string =>
    `the resumed eval ended before reaching the call to ${tool} it paused on; that call did not run. Code that pauses for review must make the same calls with the same arguments when run again.`,
  /** A resumed eval whose tools this process does not know (no model call yet, tools named in `ptc`). */
  toolsUnknown: (names: readonly string[]): string =>
    `the paused eval called ${names.join(", ")}, which this process does not know yet (tools named in ptc are learned from the agent's model calls); pass those tools as instances in ptc so any process can resume. Nothing ran.`,
  /** A reviewed call whose arguments the reviewer could not be shown exactly as the tool would get them. */
  unreviewableArgs: (tool: string, part: string): string =>
    `${tool} needs human review, and the reviewer sees its arguments as JSON, but ${part}, which JSON cannot show as the tool would get it. Pass plain data (strings, finite numbers, booleans, null, plain objects and arrays; e.g. [...set] for a Set, an ISO string for a Date); the call did not run.`,
  /** Malformed resume values (thrown from the eval tool; the ToolNode reports them). */
  badResume: (tool: string, decisions: unknown): string =>
    `Resume a call to ${tool} from code with { decisions: [one decision] }; got ${Array.isArray(decisions) ? `${decisions.length} decisions` : "no decisions list"}`,
  notAllowed: (tool: string, type: unknown, allowed: readonly string[]): string =>
    `Decision ${JSON.stringify(type)} is not allowed for ${tool}; allowed: ${allowed.join(", ")}`,
  editRenames: (tool: string, name: unknown): string =>
    `An edit of a call to ${tool} from code must keep editedAction.name "${tool}", got ${JSON.stringify(name)}`,
  editArgs: (tool: string): string => `An edit of a call to ${tool} needs editedAction.args as an object`,
  rejectMessage: (tool: string): string => `The message of a rejected call to ${tool} must be a string`,
});

function briefArgs(args: unknown): string {
  let text: string;
  try {
    text = JSON.stringify(args) ?? "";
  } catch {
    text = "…";
  }
  return text.length > 120 ? `${text.slice(0, 119)}…` : text;
}
