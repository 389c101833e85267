/**
 * The model-facing output contract of one eval: what the model reads in the ToolMessage.
 *
 * ```
 * <notice>            host notices (restored state, rollbacks), when there are any
 * <console>           console lines; warn/error lines carry a [warn]/[error] mark
 * <result> | <error>  the completion value, or what went wrong
 * ```
 * Everything between the tags is guest-controlled text: control characters and lone surrogates are
 * escaped, and anything shaped like one of our tags or a chat-template marker is defused, so
 * guest output cannot close a section early or pose as a tool result or system instruction. The
 * parts share one budget of `maxResultChars`; an oversized part keeps its head and tail around a
 * marker saying how much was cut and, when the caller keeps full texts, where the full text went.
 * A `<hint>` for a known mistake and a one-line `<status>` close the output when given.
 *
 * Guest text can be far larger than what is shown, and all of this runs on the Node main thread:
 * values are rendered within the budget, and only the head and tail that can be shown are escaped.
 */
import {
  renderValue as renderBounded,
  resultPiecesOf,
  type ConsoleEntry,
  type EvalReport,
  type SandboxError,
} from "../index.js";
import { INTERPRETER_LIMITS } from "./limits.js";
import type { KeptOutput } from "./outcome.js";
import { OUTPUT_TEXT } from "./prompts.js";

/** Options of {@link formatEvalOutput}. */
export interface FormatOptions {
  /** Budget, in characters, of the whole output (tags included). */
  maxResultChars: number;
  /** Maps a line of the script that ran to the model's own line (from `transformCode`). */
  lineMap?: (generatedLine: number) => number;
  /** Script name used in guest stack traces, whose line numbers `lineMap` rewrites. Default `"<eval>"`. */
  filename?: string;
  /** One-line host notices shown first (what a restore lost, a rollback...). */
  notices?: string[];
  /**
   * Keeps the full text of a part that must be cut, and says where; without it, cut text is gone.
   * The text is as the guest produced it (not escaped): it is data for later reads. `head(n)` is
   * its first `n` characters, taken without copying all of a large text first.
   */
  keep?: (section: KeptOutput["section"], text: string, head: (chars: number) => string) => KeptOutput | undefined;
  /** A hint for a known mistake, shown after the result or error. */
  hint?: string;
  /** The one-line outcome, shown last. */
  status?: string;
}

type Section = "notice" | "console" | "result" | "error" | "hint" | "status";

/** Renders one eval's report as the text the model reads. */
export function formatEvalOutput(report: EvalReport, options: FormatOptions): string {
  const parts: Array<{ section: Section; text: string; pieces?: readonly string[] | undefined }> = [];
  if (options.notices && options.notices.length > 0)
    parts.push({ section: "notice", text: options.notices.join("\n") });
  const consoleText = renderConsole(report.console, report.consoleTruncated);
  if (consoleText !== undefined) parts.push({ section: "console", text: consoleText });
  const limit = Math.max(0, Math.floor(options.maxResultChars));
  if (report.ok)
    parts.push({ section: "result", text: renderValue(report.value, limit), pieces: resultPiecesOf(report) });
  else parts.push({ section: "error", text: renderError(report.error, options, limit) });
  if (options.hint !== undefined) parts.push({ section: "hint", text: options.hint });
  if (options.status !== undefined) parts.push({ section: "status", text: options.status });

  const safe = parts.map((part) => ({ ...part, ...neutralizeShown(part.text, part.pieces, limit) }));
  const framing = safe.reduce((sum, part) => sum + frame(part.section, "").length, 0) + safe.length - 1;
  const budgets = layOut(
    safe.map((part) => ({ section: part.section, length: part.shown.length + part.omitted })),
    Math.max(0, limit - framing),
  );
  return safe
    .map((part, index) => {
      const budget = budgets[index] ?? 0;
      const section = part.section;
      const keepable = section === "console" || section === "result" || section === "error";
      const cut = part.omitted > 0 || part.shown.length > budget;
      const kept =
        keepable && cut
          ? options.keep?.(section, part.text, (chars) => headOf(part.text, part.pieces, chars))
          : undefined;
      return frame(part.section, truncateMiddle(part.shown, budget, kept, part.omitted));
    })
    .join("\n");
}

/**
 * The escaped text of a part, or, for a part too long to be shown whole, its escaped head and tail
 * joined, with `omitted` raw characters left out between them (escaping never shortens text by
 * more than half, so such a part is always cut in the middle, where the join is). The head and
 * tail of a text decoded in `pieces` come from those pieces: reading the text itself would first
 * copy all of it.
 */
function neutralizeShown(
  text: string,
  pieces: readonly string[] | undefined,
  limit: number,
): { shown: string; omitted: number } {
  const edge = 2 * limit + 2;
  if (text.length <= 2 * edge) return { shown: neutralize(text), omitted: 0 };
  const head = neutralize(headOf(text, pieces, edge));
  const tail = neutralize(tailOf(text, pieces, edge));
  return { shown: head + tail, omitted: text.length - 2 * edge };
}

/** The first `chars` characters of `text`, which is `pieces` joined when they are given. */
function headOf(text: string, pieces: readonly string[] | undefined, chars: number): string {
  if (pieces === undefined) return text.slice(0, chars);
  let head = "";
  for (const piece of pieces) {
    if (head.length + piece.length >= chars) return head + piece.slice(0, chars - head.length);
    head += piece;
  }
  return head;
}

/** The last `chars` characters of `text`, which is `pieces` joined when they are given. */
function tailOf(text: string, pieces: readonly string[] | undefined, chars: number): string {
  if (pieces === undefined) return text.slice(text.length - chars);
  let tail = "";
  for (let i = pieces.length - 1; i >= 0; i--) {
    const piece = pieces[i]!;
    if (tail.length + piece.length >= chars) return piece.slice(piece.length - (chars - tail.length)) + tail;
    tail = piece + tail;
  }
  return tail;
}

/**
 * Renders a value the guest returned: strings raw, everything else the way Node's `util.inspect`
 * shows it (`10n`, `-0`, `Map(2) {...}`, `Set(1) {...}`, `<ref *1>`/`[Circular *1]`, holes).
 * Opaque guest things arrive as `GuestOpaque` instances, which render themselves
 * (`[Function name]`, `[Getter/Setter]`...). Work and length are bounded by about `maxChars`:
 * what lies past it shows as `... N more items` (see src/render.ts).
 */
export function renderValue(value: unknown, maxChars?: number): string {
  if (typeof value === "string") return value;
  return renderBounded(value, maxChars);
}

function renderConsole(entries: readonly ConsoleEntry[], truncated: boolean): string | undefined {
  if (entries.length === 0 && !truncated) return undefined;
  const lines = entries.map((entry) =>
    entry.level === "warn" || entry.level === "error" ? `[${entry.level}] ${entry.text}` : entry.text,
  );
  if (truncated) lines.push(OUTPUT_TEXT.consoleTruncated);
  return lines.join("\n");
}

function renderError(error: SandboxError, options: FormatOptions, limit: number): string {
  const guest = error.guest;
  if (!guest) return `${OUTPUT_TEXT.errorLabel(error.code)}: ${error.message}`;
  if (guest.nonError) {
    // `throw "x"` shows "x" with its quotes, so an empty or whitespace string is still visible.
    return OUTPUT_TEXT.thrownNonError(
      guest.name,
      guest.name === "string" ? JSON.stringify(guest.message) : guest.message,
    );
  }
  const head = guest.message === "" ? guest.name : `${guest.name}: ${guest.message}`;
  // Frames at the top matter; a guest-planted stack of megabytes is not walked in full.
  const frames = guest.stack ? stripStackHeader(guest.stack, head) : "";
  const stack = mapStackLines(frames.length > 2 * limit ? `${frames.slice(0, 2 * limit)}\n    ...` : frames, options);
  return stack.trim() === "" ? head : `${head}\n${stack.trimEnd()}`;
}

/** V8-style stacks repeat `Name: message` first; QuickJS's hold only frames. */
function stripStackHeader(stack: string, head: string): string {
  return stack.startsWith(head) ? stack.slice(head.length).replace(/^\n/, "") : stack;
}

function mapStackLines(stack: string, options: FormatOptions): string {
  const lineMap = options.lineMap;
  if (!lineMap) return stack;
  const filename = escapeRegExp(options.filename ?? "<eval>");
  // Columns are dropped for mapped lines: type stripping reflows code, so they would mislead.
  return stack.replace(
    new RegExp(`${filename}:(\\d+)(?::\\d+)?`, "g"),
    (_match, line: string) => `${options.filename ?? "<eval>"}:${lineMap(Number(line))}`,
  );
}

function escapeRegExp(text: string): string {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

// ---------------------------------------------------------------------------------------------
// Untrusted text.

const OUR_TAGS = "notice|console|result|error|hint|status";
/** Tags of ours and shapes that chat formats and agent frameworks give meaning to. */
// One `\s*` on each side of the optional `/`, never two in a row: linear on long whitespace runs.
const TAG_LIKE = new RegExp(
  `<(?=\\s*(?:\\/\\s*)?(?:${OUR_TAGS}|system|user|assistant|human|tool|tool_result|tool_use|tool_call|function_results?|function_calls?|instructions?|stdout|stderr|output)(?:[\\s>/=]|$))`,
  "gi",
);
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/g;
// C0 controls except tab and newline, DEL, C1 controls.
// eslint-disable-next-line no-control-regex
const CONTROL = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F]/g;

/** Anything {@link neutralize} might change; most output has none, and one scan is cheaper than five. */
// eslint-disable-next-line no-control-regex
const MAY_NEED_NEUTRALIZING = /[\u0000-\u0008\u000B-\u001F\u007F-\u009F\uD800-\uDFFF<]/;

/** Makes guest text safe to place between our tags without changing what it says. */
function neutralize(text: string): string {
  if (!MAY_NEED_NEUTRALIZING.test(text)) return text;
  return text
    .replace(/\r\n/g, "\n")
    .replace(LONE_SURROGATE, (unit) => `\\u${unit.charCodeAt(0).toString(16).toUpperCase()}`)
    .replace(CONTROL, (char) => `\\x${char.charCodeAt(0).toString(16).padStart(2, "0")}`)
    .replace(TAG_LIKE, "&lt;")
    .replace(/<\|/g, "&lt;|");
}

function frame(section: Section, body: string): string {
  return `<${section}>\n${body}\n</${section}>`;
}

// ---------------------------------------------------------------------------------------------
// Truncation.

/** Characters a cut part keeps at least at each end. */
const MIN_SIDE_CHARS = 8;

/**
 * The smallest `maxResultChars` accepted: room for every section's tags and, in each of the five
 * sections, {@link MIN_SIDE_CHARS} of head and tail around the shortest marker. Below it, no layout
 * fits a reply with a notice, console, error, hint and status that all need cutting.
 */
export const MIN_RESULT_CHARS = INTERPRETER_LIMITS.minResultChars;

/**
 * Budgets of the parts within `budget` (tags excluded). Every part first gets the least a cut
 * keeps (its head, its tail and the shortest marker), then the status line gets the rest of its
 * length, then the other parts share what is left: small parts keep everything, large ones split
 * the rest evenly.
 */
function layOut(parts: ReadonlyArray<{ section: Section; length: number }>, budget: number): number[] {
  const lengths = parts.map((part) => part.length);
  if (lengths.reduce((sum, length) => sum + length, 0) <= budget) return lengths;
  const floors = lengths.map((length) =>
    Math.min(length, 2 * MIN_SIDE_CHARS + OUTPUT_TEXT.truncatedBrief(length).length),
  );
  let remaining = budget - floors.reduce((sum, floor) => sum + floor, 0);
  // Below MIN_RESULT_CHARS: plain sharing still keeps the total within the budget.
  if (remaining < 0) return shareBudget(lengths, budget);
  const budgets = floors.slice();
  const status = parts.findIndex((part) => part.section === "status");
  if (status >= 0) {
    const more = Math.min(lengths[status]! - floors[status]!, remaining);
    budgets[status] = budgets[status]! + more;
    remaining -= more;
  }
  const others = parts.flatMap((_part, index) => (index === status ? [] : [index]));
  const shares = shareBudget(
    others.map((index) => lengths[index]! - floors[index]!),
    remaining,
  );
  others.forEach((index, position) => {
    budgets[index] = budgets[index]! + shares[position]!;
  });
  return budgets;
}

/** Splits `budget` over parts: small parts keep everything, large ones share the rest evenly. */
function shareBudget(lengths: number[], budget: number): number[] {
  const shares = new Array<number>(lengths.length).fill(0);
  const order = lengths.map((length, index) => ({ length, index })).sort((a, b) => a.length - b.length);
  let remaining = budget;
  order.forEach(({ length, index }, position) => {
    const share = Math.min(length, Math.floor(remaining / (order.length - position)));
    shares[index] = share;
    remaining -= share;
  });
  return shares;
}

/**
 * Keeps the head and the tail of `text` within `budget` characters, the marker included. The
 * marker is the most informative one that leaves {@link MIN_SIDE_CHARS} at each end: where the full
 * text was kept (if it was), then a shorter form of that, then the count alone, then a brief count.
 * `omitted` counts characters already left out in the middle of `text` (a part too long to escape
 * whole).
 */
export function truncateMiddle(text: string, budget: number, kept?: KeptOutput, omitted = 0): string {
  if (text.length <= budget && omitted === 0) return text;
  // Sized for the largest possible count; the exact count printed below is never longer.
  const markers = [
    ...(kept === undefined
      ? []
      : [(n: number) => OUTPUT_TEXT.truncated(n, kept), (n: number) => OUTPUT_TEXT.truncatedCompact(n, kept)]),
    (n: number) => OUTPUT_TEXT.truncated(n),
    (n: number) => OUTPUT_TEXT.truncatedBrief(n),
  ];
  const marker =
    markers.find((m) => m(text.length + omitted).length + 2 * MIN_SIDE_CHARS <= budget) ?? markers[markers.length - 1]!;
  const keep = budget - marker(text.length + omitted).length;
  if (keep < 0) return text.slice(0, avoidSplitPairBack(text, budget));
  const headEnd = avoidSplitPairBack(
    text,
    Math.max(Math.min(MIN_SIDE_CHARS, keep), Math.min(keep - MIN_SIDE_CHARS, Math.ceil(keep * 0.6))),
  );
  const tailStart = Math.max(headEnd, avoidSplitPair(text, text.length - (keep - headEnd)));
  return `${text.slice(0, headEnd)}${marker(tailStart - headEnd + omitted)}${text.slice(tailStart)}`;
}

/** Moves a cut back off the middle of a surrogate pair (the head then ends before the pair). */
function avoidSplitPairBack(text: string, index: number): number {
  return avoidSplitPair(text, index) === index ? index : index - 1;
}

/** Moves a cut off the middle of a surrogate pair. */
function avoidSplitPair(text: string, index: number): number {
  const code = text.charCodeAt(index);
  return index > 0 && index < text.length && code >= 0xdc00 && code <= 0xdfff ? index + 1 : index;
}
