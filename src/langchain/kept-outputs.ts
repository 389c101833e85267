/**
 * Where the full text of a cut eval output goes, so nothing is lost to `maxResultChars`:
 *
 * - into the agent's files in graph state (deepagents' `files` channel, which its `read_file`,
 *   `ls` and `grep` tools read), as a state update returned with the ToolMessage;
 * - otherwise into a per-session in-memory {@link OutputStore} that guest code reads back with
 *   `readOutput(path)`.
 *
 * Both are bounded per thread by `maxKeptOutputChars`: the oldest kept outputs go first.
 */
import type { KeptOutput } from "./outcome.js";
import type { StateUpdate } from "./ptc.js";

/** Folder of kept outputs, in the agent's files and in the store alike. */
export const KEPT_OUTPUT_DIR = "/eval_outputs";

/** The path of one section of one eval call's output. */
export function keptOutputPath(evalCallId: string, section: KeptOutput["section"]): string {
  // Tool call ids come from the model provider: keep them readable but path-safe.
  const id = evalCallId.replace(/[^A-Za-z0-9_-]/g, "_").slice(0, 80) || "eval";
  return `${KEPT_OUTPUT_DIR}/${id}/${section}.txt`;
}

/** A bounded map of path → text; inserting past the cap evicts the oldest entries. */
export class OutputStore {
  readonly #entries = new Map<string, string>();
  readonly #maxChars: number;
  #chars = 0;

  constructor(maxChars: number) {
    this.#maxChars = maxChars;
  }

  /** Characters held. */
  get size(): number {
    return this.#chars;
  }

  /** Paths held, oldest first. */
  paths(): string[] {
    return [...this.#entries.keys()];
  }

  /** The text kept under `path`, if it is still there. */
  get(path: string): string | undefined {
    return this.#entries.get(path);
  }

  /** Keeps `text` under `path` (its head only when it alone exceeds the cap; `head(n)` takes it). */
  put(section: KeptOutput["section"], path: string, text: string, head = headReader(text)): KeptOutput {
    const kept = head(this.#maxChars);
    this.#remove(path);
    while (this.#chars + kept.length > this.#maxChars) {
      const oldest = this.#entries.keys().next();
      if (oldest.done) break;
      this.#remove(oldest.value);
    }
    this.#entries.set(path, kept);
    this.#chars += kept.length;
    return { section, path, store: "store", chars: kept.length, complete: kept.length === text.length };
  }

  #remove(path: string): void {
    const existing = this.#entries.get(path);
    if (existing === undefined) return;
    this.#entries.delete(path);
    this.#chars -= existing.length;
  }
}

/** The first `chars` characters of `text`, read from the text itself. */
const headReader =
  (text: string) =>
  (chars: number): string =>
    text.slice(0, chars);

/** A file as deepagents keeps it in graph state (its v2 file format). */
interface StateFile {
  content: string;
  mimeType: string;
  created_at: string;
  modified_at: string;
}

/** The agent's files in graph state, when the agent has a `files` channel (deepagents' filesystem middleware). */
export function stateFilesOf(state: unknown): Record<string, unknown> | undefined {
  if (typeof state !== "object" || state === null) return undefined;
  const files = (state as { files?: unknown }).files;
  return typeof files === "object" && files !== null && !Array.isArray(files)
    ? (files as Record<string, unknown>)
    : undefined;
}

/**
 * Collects kept outputs of one eval as one `files` state update, evicting (writing `null` for, which
 * deepagents' reducer reads as a delete) the oldest kept outputs already in state past the cap.
 */
export class StateFilesWriter {
  readonly #existing: Array<{ path: string; chars: number; createdAt: string }>;
  readonly #maxChars: number;
  readonly #now: () => Date;
  readonly #update: Record<string, StateFile | null> = {};

  constructor(files: Record<string, unknown>, maxChars: number, now: () => Date = () => new Date()) {
    this.#maxChars = maxChars;
    this.#now = now;
    this.#existing = Object.entries(files)
      .filter(([path]) => path.startsWith(`${KEPT_OUTPUT_DIR}/`))
      .map(([path, file]) => ({ path, chars: contentLength(file), createdAt: createdAtOf(file) }))
      .sort((a, b) => (a.createdAt < b.createdAt ? -1 : a.createdAt > b.createdAt ? 1 : 0));
  }

  /** Adds `text` under `path` to the update (its head only when it alone exceeds the cap; `head(n)` takes it). */
  put(section: KeptOutput["section"], path: string, text: string, head = headReader(text)): KeptOutput {
    const kept = head(this.#maxChars);
    let total = this.#existing.reduce((sum, file) => sum + (file.path === path ? 0 : file.chars), 0) + kept.length;
    while (total > this.#maxChars) {
      const oldest = this.#existing.shift();
      if (oldest === undefined) break;
      if (oldest.path === path) continue;
      total -= oldest.chars;
      this.#update[oldest.path] = null;
    }
    const at = this.#now().toISOString();
    this.#update[path] = { content: kept, mimeType: "text/plain", created_at: at, modified_at: at };
    this.#existing.push({ path, chars: kept.length, createdAt: at });
    return { section, path, store: "files", chars: kept.length, complete: kept.length === text.length };
  }

  /** The state update to return with the ToolMessage, if anything was kept. */
  get updates(): StateUpdate[] {
    return Object.keys(this.#update).length === 0 ? [] : [["files", { ...this.#update }]];
  }
}

function contentLength(file: unknown): number {
  const content = (file as { content?: unknown } | null)?.content;
  if (typeof content === "string") return content.length;
  if (Array.isArray(content))
    return content.reduce((sum: number, line) => sum + (typeof line === "string" ? line.length + 1 : 0), 0);
  return 0;
}

function createdAtOf(file: unknown): string {
  const at = (file as { created_at?: unknown } | null)?.created_at;
  return typeof at === "string" ? at : "";
}
