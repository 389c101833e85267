/**
 * Test support for `task()`: a chat model standing in for a subagent, which answers each task from
 * its description (calling the structured-output tool when the agent bound one), can take a while,
 * and records how many of its runs were in flight at once and which runs saw the abort.
 */
import { BaseChatModel, type BindToolsInput } from "@langchain/core/language_models/chat_models";
import { AIMessage, type BaseMessage } from "@langchain/core/messages";
import type { ChatResult } from "@langchain/core/outputs";

/** What all copies of one fake subagent model saw. */
export class SubagentObserver {
  /** Descriptions of the tasks started, in start order. */
  readonly started: string[] = [];
  /** Descriptions of the tasks answered. */
  readonly completed: string[] = [];
  /** Descriptions of the tasks whose run received the abort. */
  readonly aborted: string[] = [];
  inFlight = 0;
  maxInFlight = 0;
  /** Whether the structured-output tool was bound, per task description. */
  readonly structured = new Map<string, boolean>();
  readonly #waiters: { count: number; resolve: () => void }[] = [];

  /** Resolves once `count` tasks have started. */
  whenStarted(count: number): Promise<void> {
    if (this.started.length >= count) return Promise.resolve();
    return new Promise((resolve) => this.#waiters.push({ count, resolve }));
  }

  /** @internal */
  noteStart(task: string): void {
    this.started.push(task);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    for (const w of this.#waiters.filter((x) => this.started.length >= x.count)) {
      this.#waiters.splice(this.#waiters.indexOf(w), 1);
      w.resolve();
    }
  }
}

/** How the fake answers a task: the value for structured output, or text. */
export type Answer = (task: string) => unknown;

export interface FakeSubagentOptions {
  answer: Answer;
  /** How long each run takes, ms (a function of the task for uneven runs). */
  delayMs?: number | ((task: string) => number);
  /** Throw this message instead of answering, for tasks it matches. */
  failWhen?: (task: string) => string | undefined;
}

function toolNameOf(tool: BindToolsInput): string {
  const t = tool as { name?: unknown; function?: { name?: unknown } };
  if (typeof t.name === "string") return t.name;
  if (typeof t.function?.name === "string") return t.function.name;
  return "<unnamed>";
}

function waitOrAbort(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal?.reason ?? new Error("aborted"));
    };
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}

/** A subagent model: one answer per run, through the structured-output tool when bound. */
export class FakeSubagentModel extends BaseChatModel {
  readonly observer: SubagentObserver;
  readonly #options: FakeSubagentOptions;
  readonly #bound: readonly string[];

  constructor(options: FakeSubagentOptions, observer = new SubagentObserver(), bound: readonly string[] = []) {
    super({});
    this.#options = options;
    this.observer = observer;
    this.#bound = bound;
  }

  _llmType(): string {
    return "fake-subagent";
  }

  /** A bound copy, so concurrent runs with different tools do not share state. */
  override bindTools(tools: BindToolsInput[]): this {
    return new FakeSubagentModel(this.#options, this.observer, tools.map(toolNameOf)) as this;
  }

  async _generate(messages: BaseMessage[], options: this["ParsedCallOptions"]): Promise<ChatResult> {
    const task = messages.filter((m) => m.getType() === "human").at(-1)?.text ?? "";
    const extract = this.#bound.find((n) => n.startsWith("extract"));
    const observer = this.observer;
    observer.structured.set(task, extract !== undefined);
    observer.noteStart(task);
    try {
      const delay =
        typeof this.#options.delayMs === "function" ? this.#options.delayMs(task) : (this.#options.delayMs ?? 0);
      try {
        await waitOrAbort(delay, options.signal);
      } catch (err) {
        observer.aborted.push(task);
        throw err;
      }
      const failure = this.#options.failWhen?.(task);
      if (failure !== undefined) throw new Error(failure);
      const value = this.#options.answer(task);
      observer.completed.push(task);
      const message =
        extract === undefined
          ? new AIMessage(typeof value === "string" ? value : JSON.stringify(value))
          : new AIMessage({
              content: "",
              tool_calls: [
                {
                  name: extract,
                  args: value as Record<string, unknown>,
                  id: `extract_${observer.started.length}`,
                  type: "tool_call",
                },
              ],
            });
      return { generations: [{ message, text: message.text }] };
    } finally {
      observer.inFlight--;
    }
  }
}
