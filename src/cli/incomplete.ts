/**
 * Tells the REPL whether a line is an unfinished statement (an open brace, template or
 * comment) so it asks for more input instead of reporting a syntax error.
 */
import { parse } from "acorn";

/** True when `code` fails to parse only because it ends too early. */
export function isIncomplete(code: string): boolean {
  const end = code.trimEnd().length;
  if (end === 0) return false;
  try {
    parse(code, { ecmaVersion: "latest", sourceType: "script", allowAwaitOutsideFunction: true, allowReturnOutsideFunction: true });
    return false;
  } catch (err) {
    const { pos, message } = err as { pos?: number; message?: string };
    if (typeof message === "string" && /^Unterminated (template|comment)/.test(message)) return true;
    return typeof pos === "number" && pos >= end;
  }
}
