/**
 * A deterministic tool-calling chat model for tests and demos: it answers each call with the next
 * message of a script, and records what it was asked (messages, system prompt, bound tool names).
 */
import { randomUUID } from "node:crypto";
import {
  BaseChatModel,
  type BaseChatModelParams,
  type BindToolsInput,
} from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage, type ToolCall } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";

/** One scripted answer: a fixed reply, or one computed from the conversation so far. */
export type ScriptStep = AIMessage | ((messages: readonly BaseMessage[]) => AIMessage);

/** What one call to the model received. */
export interface ScriptedCall {
  messages: BaseMessage[];
  /** Text of the system message, "" when there is none. */
  systemPrompt: string;
  /** Names of the tools bound for this call. */
  toolNames: string[];
}

/** Shorthand for a scripted AI message that calls one tool. */
export function callTool(name: string, args: Record<string, unknown>, id?: string): AIMessage {
  const toolCall: ToolCall = { name, args, type: "tool_call", ...(id === undefined ? {} : { id }) };
  return new AIMessage({ content: "", tool_calls: [toolCall] });
}

/** Shorthand for a scripted final answer. */
export function reply(text: string): AIMessage {
  return new AIMessage(text);
}

function toolNameOf(tool: BindToolsInput): string {
  if (typeof tool === "object" && tool !== null) {
    const t = tool as { name?: unknown; function?: { name?: unknown } };
    if (typeof t.name === "string") return t.name;
    if (typeof t.function?.name === "string") return t.function.name;
  }
  return "<unnamed>";
}

/** Options of {@link ScriptedChatModel}. */
export interface ScriptedChatModelParams extends BaseChatModelParams {
  /**
   * Prefix of the ids the model gives messages and tool calls that have none. Default: random per
   * instance, so runs on one thread (in this process or another one, on a shared checkpointer)
   * never reuse an id, which would make the messages reducer replace history. Set it for
   * reproducible ids.
   */
  idPrefix?: string;
}

/**
 * Replays `script` in order, one step per model call; a call past the end throws, so a test
 * notices an agent that loops. Messages without an id get `scripted-<prefix>-<n>` and tool calls
 * `call_<prefix>_<n>`, unique per instance (see {@link ScriptedChatModelParams.idPrefix}).
 */
export class ScriptedChatModel extends BaseChatModel {
  /** Every call received, in order. */
  readonly calls: ScriptedCall[] = [];
  readonly #script: readonly ScriptStep[];
  #next = 0;
  #ids = 0;
  #boundTools: string[] = [];
  readonly #idPrefix: string;

  constructor(script: readonly ScriptStep[], params: ScriptedChatModelParams = {}) {
    const { idPrefix, ...base } = params;
    super(base);
    this.#script = script;
    this.#idPrefix = idPrefix ?? randomUUID().slice(0, 8);
  }

  _llmType(): string {
    return "scripted";
  }

  /** Records the tool names; the script decides which tools get called. */
  override bindTools(tools: BindToolsInput[]): this {
    this.#boundTools = tools.map(toolNameOf);
    return this;
  }

  /** Steps not yet used. */
  get remaining(): number {
    return this.#script.length - this.#next;
  }

  async _generate(messages: BaseMessage[]): Promise<ChatResult> {
    const step = this.#script[this.#next];
    if (step === undefined) throw new Error(`ScriptedChatModel: script exhausted after ${this.#script.length} calls`);
    this.#next++;
    const system = messages.find((m) => m.getType() === "system");
    this.calls.push({ messages: [...messages], systemPrompt: system?.text ?? "", toolNames: [...this.#boundTools] });
    const produced = typeof step === "function" ? step(messages) : step;
    const toolCalls = (produced.tool_calls ?? []).map((c) => ({
      ...c,
      id: c.id ?? `call_${this.#idPrefix}_${++this.#ids}`,
    }));
    // A step's own id wins: runs on one thread need distinct ids, or the messages reducer replaces history.
    const message = new AIMessage({
      content: produced.content,
      tool_calls: toolCalls,
      id: produced.id ?? `scripted-${this.#idPrefix}-${this.#next}`,
    });
    return { generations: [{ message, text: message.text }] };
  }
}
