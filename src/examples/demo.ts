/**
 * `npm run demo`: a LangChain agent with the code interpreter middleware answers a question over
 * a paginated order-book API by writing one program that fetches, filters and aggregates inside
 * the sandbox (programmatic tool calling). The transcript shows what the model read: the final
 * value only. Then: how many bytes of tool results stayed in the sandbox, and the timings.
 *
 * Runs on an embedded scripted model (no API key, no network). `--model provider:model` swaps in
 * a real model through LangChain's initChatModel, with the provider's key from the environment.
 */
import { parseArgs } from "node:util";
import { BaseCallbackHandler } from "@langchain/core/callbacks/base";
import type { BaseChatModel } from "@langchain/core/language_models/chat_models";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { createAgent, initChatModel } from "langchain";
import { createCodeInterpreterMiddleware } from "../langchain/index.js";
import { datasetTools, generateOrders, topProductsByDeliveredRevenue, type ToolTraffic } from "./demo-data.js";
import { QUESTION, scriptedModel } from "./demo-script.js";

const HELP = `Usage: npm run demo [-- --model provider:model]

Without --model, an embedded scripted model plays the agent (deterministic, no key, no network).
With --model, a real model is created by LangChain's initChatModel; it needs the provider's
integration package (e.g. npm install @langchain/openai) and API key (e.g. OPENAI_API_KEY).`;

/** API key variables of common providers, to fail early with a clear message. */
const PROVIDER_KEYS: Readonly<Record<string, string>> = {
  openai: "OPENAI_API_KEY",
  anthropic: "ANTHROPIC_API_KEY",
  "google-genai": "GOOGLE_API_KEY",
  mistralai: "MISTRAL_API_KEY",
  groq: "GROQ_API_KEY",
  fireworks: "FIREWORKS_API_KEY",
  together: "TOGETHER_AI_API_KEY",
  xai: "XAI_API_KEY",
  deepseek: "DEEPSEEK_API_KEY",
  cerebras: "CEREBRAS_API_KEY",
};

/** Wall-clock time of every tool and model run, from LangChain's callbacks. */
class Timings extends BaseCallbackHandler {
  name = "demo-timings";
  readonly #started = new Map<string, { kind: string; at: number }>();
  readonly totals = new Map<string, { count: number; ms: number }>();

  #start(kind: string, runId: string): void {
    this.#started.set(runId, { kind, at: performance.now() });
  }
  #end(runId: string): void {
    const s = this.#started.get(runId);
    if (!s) return;
    this.#started.delete(runId);
    const t = this.totals.get(s.kind) ?? { count: 0, ms: 0 };
    t.count++;
    t.ms += performance.now() - s.at;
    this.totals.set(s.kind, t);
  }
  override handleToolStart(
    tool: { id?: string[]; name?: string },
    _input: string,
    runId: string,
    parentRunId?: string,
    _tags?: string[],
    _meta?: Record<string, unknown>,
    runName?: string,
  ): void {
    // Tools called by guest code are child runs of the eval tool's run.
    const fromSandbox = parentRunId !== undefined && this.#started.get(parentRunId)?.kind.startsWith("tool ") === true;
    this.#start(`tool ${runName ?? tool.name ?? "?"}${fromSandbox ? " (from the sandbox)" : ""}`, runId);
  }
  override handleToolEnd(_output: unknown, runId: string): void {
    this.#end(runId);
  }
  override handleToolError(_err: unknown, runId: string): void {
    this.#end(runId);
  }
  override handleChatModelStart(_llm: unknown, _messages: unknown, runId: string): void {
    this.#start("model", runId);
  }
  override handleLLMEnd(_output: unknown, runId: string): void {
    this.#end(runId);
  }
  override handleLLMError(_err: unknown, runId: string): void {
    this.#end(runId);
  }
}

const text = (m: BaseMessage): string => (typeof m.content === "string" ? m.content : JSON.stringify(m.content));
const bytes = (s: string): number => Buffer.byteLength(s);
const kib = (n: number): string => (n < 1024 ? `${n} B` : `${(n / 1024).toFixed(1)} KiB`);
/** Prints `body` under a column label: the label on the first line, the rule on the rest. */
const labelled = (label: string, body: string): string =>
  body
    .split("\n")
    .map((line, i) => `${(i === 0 ? label : "").padEnd(8)}│ ${line}`)
    .join("\n");

function printTranscript(messages: readonly BaseMessage[]): void {
  for (const m of messages) {
    const type = m.getType();
    if (type === "human") console.log(labelled("user", text(m)));
    else if (type === "ai") {
      const calls =
        "tool_calls" in m && Array.isArray(m.tool_calls)
          ? (m.tool_calls as Array<{ name: string; args: Record<string, unknown> }>)
          : [];
      if (text(m).trim()) console.log(labelled("model", text(m)));
      for (const call of calls) {
        if (typeof call.args.code === "string") {
          console.log(labelled("model", `calls ${call.name} with a program (${bytes(call.args.code)} B):`));
          console.log(labelled("", call.args.code));
        } else console.log(labelled("model", `calls ${call.name} ${JSON.stringify(call.args)}`));
      }
    } else if (type === "tool") {
      const name = "name" in m && typeof m.name === "string" ? m.name : "tool";
      console.log(labelled(name, `returns ${kib(bytes(text(m)))}, which is all the model reads:`));
      console.log(labelled("", text(m)));
    }
    console.log(labelled("", ""));
  }
}

async function realModel(spec: string): Promise<BaseChatModel> {
  const provider = spec.includes(":") ? spec.slice(0, spec.indexOf(":")) : "";
  const key = PROVIDER_KEYS[provider];
  if (!provider)
    throw new Error(`--model takes provider:model, e.g. openai:gpt-4.1 or anthropic:claude-sonnet-4-5; got '${spec}'`);
  if (key && !process.env[key]) throw new Error(`--model ${spec} needs ${key} in the environment`);
  try {
    return (await initChatModel(spec)) as unknown as BaseChatModel;
  } catch (err) {
    throw new Error(
      `could not create ${spec}: ${(err as Error).message}\n(the provider's package must be installed, e.g. npm install @langchain/${provider})`,
    );
  }
}

async function main(): Promise<number> {
  const { values } = parseArgs({ options: { model: { type: "string" }, help: { type: "boolean", short: "h" } } });
  if (values.help) {
    console.log(HELP);
    return 0;
  }
  const orders = generateOrders();
  const traffic: ToolTraffic = { calls: 0, resultBytes: 0 };
  const tools = datasetTools(orders, traffic);
  const model = values.model ? await realModel(values.model) : scriptedModel();
  const interpreter = createCodeInterpreterMiddleware({ ptc: ["list_regions", "fetch_orders"] });
  const timings = new Timings();
  try {
    const agent = createAgent({ model, tools, middleware: [interpreter] });
    console.log(`quickjs-native demo · model: ${values.model ?? "embedded scripted model (no key, no network)"}`);
    console.log(
      `dataset: ${orders.length} orders behind list_regions + fetch_orders (paginated), callable from the sandbox as tools.*\n`,
    );
    const started = performance.now();
    const result = await agent.invoke(
      { messages: [new HumanMessage(QUESTION)] },
      { configurable: { thread_id: "demo" }, callbacks: [timings] },
    );
    const wallMs = performance.now() - started;
    const messages = result.messages as BaseMessage[];
    printTranscript(messages);

    // Tool results that reached the model directly (a real model may call the tools itself).
    const toolMessages = messages.filter((m) => m.getType() === "tool");
    const direct = toolMessages
      .filter((m) => (m as { name?: string }).name !== "eval")
      .reduce((n, m) => n + bytes(text(m)), 0);
    const seen = toolMessages.reduce((n, m) => n + bytes(text(m)), 0);
    const kept = Math.max(0, traffic.resultBytes - direct);
    console.log("what stayed out of the model's context");
    console.log(`  tool calls made:            ${traffic.calls} (${kib(traffic.resultBytes)} of JSON results)`);
    console.log(
      `  kept inside the sandbox:    ${kib(kept)} (~${Math.round(kept / 4).toLocaleString("en-US")} tokens never sent to the model)`,
    );
    console.log(`  tool output the model read: ${kib(seen)}`);

    console.log("timings");
    console.log(`  agent run:  ${wallMs.toFixed(1)} ms`);
    // Sandbox tool calls overlap (Promise.all), so their total exceeds the eval's own time.
    for (const [kind, t] of [...timings.totals].sort()) {
      console.log(
        `  ${kind.padEnd(37)} ${String(t.count).padStart(3)}× ${(t.ms / t.count).toFixed(2).padStart(8)} ms each`,
      );
    }

    const expected = topProductsByDeliveredRevenue(orders);
    const answer = text(messages.at(-1)!);
    const named = expected.every(({ product }) => answer.includes(product));
    console.log(
      `check: host-side answer ${expected.map((e) => `${e.product} ${e.revenue}`).join(", ")}; the agent's answer ${named ? "names all three" : "DOES NOT name all three"}`,
    );
    return named || values.model ? 0 : 1;
  } finally {
    interpreter.dispose();
  }
}

main().then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    console.error(`demo: ${err instanceof Error ? err.message : String(err)}`);
    process.exitCode = 1;
  },
);
