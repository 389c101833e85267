/**
 * The JavaScript half of the transform (`transformCode` in `transform.ts` is the whole), and
 * {@link transformCodeLazily}, which loads the TypeScript half only for code that needs it.
 *
 * **Declaration persistence.** The engine runs the result as a global script with top-level
 * `await`, so the last statement's completion value is the result. Top-level `let`/`const` and
 * `class` declarations would become global *lexical* bindings, which a later eval may not
 * re-declare; REPL-style, they are rewritten to `var` (a global object property, re-declarable, and
 * a declaration keeps its empty completion value). `function` declarations are already var-scoped
 * and hoisted and stay as written. Edits stay within a line, so lines keep their numbers.
 *
 * This module does not load the TypeScript stripper (a WebAssembly module of 3.6 MB, hundreds of ms to load): most evals are
 * plain JavaScript and never pay for it.
 */
import { parse, type Options as AcornOptions, type Pattern, type Program } from "acorn";
import { comparesAgainstTypeNames } from "./transform-type-arguments.js";

/** What `transformCode` (`transform.ts`) produced. */
export interface TransformResult {
  /** The script to run as a global script with top-level `await` enabled. */
  code: string;
  /** Every name bound by a top-level declaration (`var`, `let`, `const`, `function`, `class`, `enum`, `namespace`). */
  declaredNames: string[];
  /**
   * Maps a 1-based line of {@link code} to the 1-based line of the model's source. Absent when the
   * lines are the same.
   */
  lineMap?: (generatedLine: number) => number;
  /** The data behind {@link lineMap}: the model's line of each line of {@link code}, in order. */
  lineTable?: number[];
  /** Whether the source was plain JavaScript or needed type stripping. */
  language: "javascript" | "typescript";
  /**
   * How types were stripped: `"erased"` (annotations replaced by spaces, every line kept) or
   * `"transpiled"` (compiled to JavaScript, for `enum`, `namespace`, parameter properties and the like).
   */
  stripping?: "erased" | "transpiled";
  /**
   * Set on the JavaScript reading when it compares against a TypeScript type name
   * (`Array.from<number>([1])` reads as `(Array.from < number) > [1]`): the TypeScript reading
   * runs instead when it parses (see `transform-type-arguments.ts`).
   */
  typeArguments?: true;
  /**
   * Set when the source is not valid JavaScript or TypeScript. {@link code} then throws a
   * `SyntaxError` carrying this message, on the offending line.
   */
  syntaxError?: { message: string; line: number; column: number };
}

/**
 * The source as JavaScript, or `undefined` when it does not parse as JavaScript (then it may be
 * TypeScript). JavaScript keeps its JavaScript meaning (`a < b > (c)` is two comparisons), unless
 * it compares against a type name: then the result says {@link TransformResult.typeArguments}.
 */
export function transformJavaScript(source: string): TransformResult | undefined {
  try {
    const program = parseScript(source);
    if (program === undefined) return undefined;
    const result: TransformResult = { ...rewriteDeclarations(source, program), language: "javascript" };
    if (comparesAgainstTypeNames(source, program)) result.typeArguments = true;
    return result;
  } catch (error) {
    return nestedTooDeeply(error);
  }
}

/** Whether the TypeScript reading is needed, given the JavaScript one (`undefined`: not JavaScript). */
export function needsTypeScript(
  javascript: TransformResult | undefined,
): javascript is (TransformResult & { typeArguments: true }) | undefined {
  return javascript === undefined || javascript.typeArguments === true;
}

/** The reading that runs: TypeScript's, unless the code is JavaScript and TypeScript's does not parse. */
export function chooseReading(javascript: TransformResult | undefined, typescript: TransformResult): TransformResult {
  return javascript !== undefined && typescript.syntaxError !== undefined ? javascript : typescript;
}

/**
 * `transformCode`'s result, with the TypeScript stripper loaded only when the source may be TypeScript
 * (and then once per thread).
 */
export async function transformCodeLazily(source: string): Promise<TransformResult> {
  const javascript = transformJavaScript(source);
  if (!needsTypeScript(javascript)) return javascript;
  return chooseReading(javascript, (await import("./transform.js")).transformTypeScript(source, false));
}

/**
 * The parsers recurse per nesting level, so thousands of `(` overflow the host stack: the result
 * for such a `RangeError`. Any other error is rethrown.
 */
export function nestedTooDeeply(error: unknown): TransformResult {
  if (error instanceof RangeError) return tooDeep();
  throw error;
}

/** The result for code nested too deeply to parse. */
export function tooDeep(): TransformResult {
  return failedParse(TOO_DEEP_MESSAGE, 1, 1, "javascript");
}

const TOO_DEEP_MESSAGE =
  "the code is nested too deeply to parse (brackets, parentheses or blocks thousands of levels deep)";

/** A result that throws `SyntaxError: message` from `line` when run. */
export function failedParse(
  message: string,
  line: number,
  column: number,
  language: TransformResult["language"],
): TransformResult {
  // Thrown from the offending line so the stack trace points at it, with the parser's own words.
  const code = `${"\n".repeat(line - 1)}throw new SyntaxError(${JSON.stringify(message)});`;
  return { code, declaredNames: [], language, syntaxError: { message, line, column } };
}

/** Maps a generated line through a {@link TransformResult.lineTable}. */
export function lineMapOf(lines: ArrayLike<number>): (generatedLine: number) => number {
  return (generatedLine) => lines[generatedLine - 1] ?? lines[lines.length - 1] ?? generatedLine;
}

// ---------------------------------------------------------------------------------------------
// Top-level declarations become re-declarable globals.

const ACORN_OPTIONS: AcornOptions = {
  ecmaVersion: "latest",
  sourceType: "script",
  allowAwaitOutsideFunction: true,
  allowHashBang: true,
};

/** What {@link rewriteDeclarations} produced. */
export interface Rewritten {
  code: string;
  declaredNames: string[];
}

interface Edit {
  at: number;
  /** Characters of the original removed at `at`. */
  remove: number;
  insert: string;
}

/** The source parsed as a script, or `undefined` when it is not JavaScript. Throws `RangeError` when nested too deeply. */
export function parseScript(source: string): Program | undefined {
  try {
    return parse(source, ACORN_OPTIONS);
  } catch (error) {
    if (error instanceof RangeError) throw error; // nesting too deep: no parser will do better
    return undefined;
  }
}

/** Rewrites the top-level declarations of a parsed script (see the module comment). */
export function rewriteDeclarations(source: string, program: Program): Rewritten {
  const names = new Set<string>();
  const edits: Edit[] = [];
  for (const statement of program.body) {
    if (statement.type === "VariableDeclaration") {
      for (const declarator of statement.declarations) collectBindingNames(declarator.id, names);
      const kind = statement.kind;
      // `const` -> `var  ` keeps every column of the line in place.
      if (kind === "let" || kind === "const")
        edits.push({ at: statement.start, remove: kind.length, insert: "var".padEnd(kind.length) });
    } else if (statement.type === "FunctionDeclaration" || statement.type === "ClassDeclaration") {
      const name = statement.id.name;
      names.add(name);
      if (statement.type === "ClassDeclaration") {
        // The `;` stops a following `(`/`[` line from continuing the class expression.
        edits.push(
          { at: statement.start, remove: 0, insert: `var ${name} = ` },
          { at: statement.end, remove: 0, insert: ";" },
        );
      }
    }
  }
  return { code: applyEdits(source, edits), declaredNames: [...names] };
}

function collectBindingNames(pattern: Pattern | null, into: Set<string>): void {
  switch (pattern?.type) {
    case "Identifier":
      into.add(pattern.name);
      break;
    case "ObjectPattern":
      for (const property of pattern.properties)
        collectBindingNames(property.type === "RestElement" ? property.argument : property.value, into);
      break;
    case "ArrayPattern":
      for (const element of pattern.elements) collectBindingNames(element, into);
      break;
    case "RestElement":
      collectBindingNames(pattern.argument, into);
      break;
    case "AssignmentPattern":
      collectBindingNames(pattern.left, into);
      break;
    default:
      // MemberExpression targets bind nothing.
      break;
  }
}

function applyEdits(source: string, edits: Edit[]): string {
  if (edits.length === 0) return source;
  let out = "";
  let cursor = 0;
  for (const edit of edits) {
    out += source.slice(cursor, edit.at) + edit.insert;
    cursor = edit.at + edit.remove;
  }
  return out + source.slice(cursor);
}
