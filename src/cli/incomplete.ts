/**
 * Tells the REPL whether the lines typed so far are an unfinished statement (an open brace,
 * template or comment) so it asks for more input instead of reporting a syntax error.
 *
 * Parsing the whole input again after every line is quadratic: 3,200 lines piped after an
 * unclosed `{` took seconds, 60 KB never finished. So a scanner follows brackets, strings,
 * templates, comments and regular expressions line by line, and the parser runs only when the
 * scanner finds every bracket closed and no operator waiting for its operand. What the scanner
 * cannot rule out (`if (x)` alone, say) goes to the parser under a budget: the characters parsed
 * for one statement stay under {@link PARSE_ALLOWANCE} plus {@link PARSE_FACTOR} times its length.
 */
import { parse } from "acorn";

/** Characters one unfinished statement may have parsed whatever its length. */
export const PARSE_ALLOWANCE = 64 * 1024;
/** Characters parsed per character of the statement, past the allowance. */
export const PARSE_FACTOR = 8;

/** A parser that throws acorn's errors (`pos`, `message`) on bad input. */
export type ScriptParser = (code: string) => void;

function parseScript(code: string): void {
  parse(code, {
    ecmaVersion: "latest",
    sourceType: "script",
    allowAwaitOutsideFunction: true,
    allowReturnOutsideFunction: true,
  });
}

/** True when `code` fails to parse only because it ends too early. */
function endsTooEarly(code: string, parser: ScriptParser): boolean {
  const end = code.trimEnd().length;
  if (end === 0) return false;
  try {
    parser(code);
    return false;
  } catch (err) {
    const { pos, message } = err as { pos?: number; message?: string };
    if (typeof message === "string" && /^Unterminated (template|comment)/.test(message)) return true;
    return typeof pos === "number" && pos >= end;
  }
}

/** After these words a `/` starts a regular expression, not a division. */
const BEFORE_EXPRESSION = new Set([
  "return",
  "typeof",
  "instanceof",
  "in",
  "of",
  "new",
  "delete",
  "void",
  "throw",
  "case",
  "do",
  "else",
  "yield",
  "await",
  "extends",
]);
const OPENERS: Record<string, string> = { ")": "(", "]": "[" };
const WORD = /[\w$\u0080-\uffff]/;

/** What the last token was: a value (a `/` after it divides), an operator waiting for its operand, or neither. */
type Last = "value" | "operator" | "other";

/** The lines of one statement being typed, and what a scanner found in them so far. */
export class PendingInput {
  readonly #parse: ScriptParser;
  #text = "";
  /** Open `(`, `[`, `{`, template literals and their `${` */
  #stack: string[] = [];
  #mode: "code" | "string" | "comment" | "regex" | "class" = "code";
  #quote = "";
  /** The previous line ended on a backslash inside a string, template or regex. */
  #escaped = false;
  /** A line ended inside a string or regex, or a bracket closed the wrong one: only the parser can tell what that is. */
  #broken = false;
  #last: Last = "other";
  #parsed = 0;
  /** Times the parser ran (for tests). */
  parses = 0;

  constructor(parser: ScriptParser = parseScript) {
    this.#parse = parser;
  }

  /** The lines so far, joined by newlines. */
  get text(): string {
    return this.#text;
  }

  /** Forgets the lines so far. */
  clear(): void {
    this.#text = "";
    this.#stack = [];
    this.#mode = "code";
    this.#escaped = false;
    this.#broken = false;
    this.#last = "other";
    this.#parsed = 0;
  }

  /** Adds a line; returns true when the lines so far are an unfinished statement (more input is wanted). */
  add(line: string): boolean {
    if (!this.#text && line.trim() === "") return false;
    const added = this.#text ? `\n${line}` : line;
    this.#text += added;
    this.#scan(added);
    const open = this.#stack.length > 0 || this.#mode === "comment" || this.#last === "operator";
    if (open && !this.#broken) return true;
    if (this.#parsed + this.#text.length > PARSE_ALLOWANCE + PARSE_FACTOR * this.#text.length) return true;
    this.#parsed += this.#text.length;
    this.parses++;
    return endsTooEarly(this.#text, this.#parse);
  }

  #scan(s: string): void {
    let i = 0;
    if (this.#escaped) {
      this.#escaped = false;
      i = 1;
    }
    for (; i < s.length; i++) {
      const c = s[i]!;
      const top = this.#stack.at(-1);
      if (this.#mode === "comment") {
        if (c === "*" && s[i + 1] === "/") {
          this.#mode = "code";
          i++;
        }
      } else if (this.#mode !== "code" || top === "`") {
        i = this.#inLiteral(s, i, c);
      } else if (c === "/" && s[i + 1] === "/") {
        const eol = s.indexOf("\n", i);
        i = eol < 0 ? s.length : eol;
      } else if (c === "/" && s[i + 1] === "*") {
        this.#mode = "comment";
        i++;
      } else if (c === "/") {
        if (this.#last === "value") this.#last = "operator";
        else this.#mode = "regex";
      } else if (WORD.test(c)) {
        let end = i + 1;
        while (end < s.length && (WORD.test(s[end]!) || (c >= "0" && c <= "9" && s[end] === "."))) end++;
        this.#last = BEFORE_EXPRESSION.has(s.slice(i, end)) ? "other" : "value";
        i = end - 1;
      } else {
        i = this.#punctuator(s, i, c, top);
      }
    }
  }

  /** One character inside a string, template text or regex; returns the index scanned to. */
  #inLiteral(s: string, i: number, c: string): number {
    if (c === "\\") {
      if (i + 1 >= s.length) this.#escaped = true;
      return i + 1;
    }
    if (this.#mode === "code") {
      // template text
      if (c === "`") {
        this.#stack.pop();
        this.#last = "value";
      } else if (c === "$" && s[i + 1] === "{") {
        this.#stack.push("${");
        this.#last = "other";
        return i + 1;
      }
      return i;
    }
    if (c === "\n") {
      this.#broken = true;
      this.#mode = "code";
    } else if (this.#mode === "string" ? c === this.#quote : this.#mode === "regex" && c === "/") {
      this.#mode = "code";
      this.#last = "value";
    } else if (this.#mode === "regex" && c === "[") {
      this.#mode = "class";
    } else if (this.#mode === "class" && c === "]") {
      this.#mode = "regex";
    }
    return i;
  }

  /** A punctuator (or whitespace) in code; returns the index scanned to. */
  #punctuator(s: string, i: number, c: string, top: string | undefined): number {
    if (c === " " || c === "\t" || c === "\n" || c === "\r") return i;
    if (c === "'" || c === '"') {
      this.#mode = "string";
      this.#quote = c;
    } else if (c === "`" || c === "(" || c === "[" || c === "{") {
      this.#stack.push(c);
      this.#last = "other";
    } else if (c === ")" || c === "]") {
      if (top === OPENERS[c]) this.#stack.pop();
      else this.#broken = true;
      this.#last = "value";
    } else if (c === "}") {
      if (top === "{" || top === "${") this.#stack.pop();
      else this.#broken = true;
      this.#last = "other";
    } else if ((c === "+" || c === "-") && s[i + 1] === c) {
      this.#last = "value"; // x++ ends a statement; ++x is followed by its operand anyway
      return i + 1;
    } else if (c === ";" || c === "#") {
      this.#last = c === ";" ? "other" : "value";
    } else {
      this.#last = "operator";
    }
    return i;
  }
}
