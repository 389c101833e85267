/**
 * Turns the code a model wrote for one eval into a global script for the engine.
 *
 * Two jobs:
 * - **Type stripping.** Plain JavaScript skips it: if acorn parses the source as a script, it is
 *   JavaScript. TypeScript goes through `@swc/wasm-typescript` (swc's parser compiled to
 *   WebAssembly, 3.6 MB): erasable TypeScript (annotations, `interface`, `as`, `!`, generics,
 *   overloads) in its strip-only mode, which replaces types with spaces so every line keeps its
 *   number; what has run-time meaning (`enum`, `namespace`, parameter properties, `<T>x`
 *   assertions) in its transform mode, whose emitted lines are mapped back through its source map
 *   ({@link TransformResult.lineMap}).
 * - **Declaration persistence**, in `transform-javascript.ts`, on the resulting JavaScript.
 *
 * swc's parser recurses in WebAssembly: code nested about a thousand levels deep overflows it, and
 * an overflow deep enough leaves the instance's memory broken for every later call ("memory access
 * out of bounds"). So TypeScript nested deeper than {@link MAX_TYPESCRIPT_NESTING} brackets is
 * refused before parsing, and any failure that is not a syntax diagnostic discards the instance: the
 * next transform loads a fresh one.
 *
 * This module loads the stripper on first use; `transformCodeLazily` (`transform-javascript.ts`)
 * imports this module only for code that is not JavaScript.
 */
import { createRequire } from "node:module";
import { decode, type SourceMapSegment } from "@jridgewell/sourcemap-codec";
import type * as Swc from "@swc/wasm-typescript";
import {
  chooseReading,
  failedParse,
  lineMapOf,
  needsTypeScript,
  nestedTooDeeply,
  parseScript,
  rewriteDeclarations,
  type TransformResult,
  tooDeep,
  transformJavaScript,
} from "./transform-javascript.js";

/** Options of {@link transformCode}. */
export interface TransformOptions {
  /** Always compile TypeScript to JavaScript, never erase types in place. */
  exactTypeScript?: boolean;
}

/**
 * Deepest bracket nesting of TypeScript handed to the stripper. swc overflowed at 1,000 levels of
 * `(` or `[` (a RangeError) and broke its instance at 2,000 (Node 20, main thread and worker); 256
 * leaves room for the parser's other recursion, and no model writes code this deep.
 */
export const MAX_TYPESCRIPT_NESTING = 256;

/** Transforms one eval's source. Never throws on bad input: syntax errors surface when the script runs. */
export function transformCode(source: string, options: TransformOptions = {}): TransformResult {
  const javascript = transformJavaScript(source);
  if (!needsTypeScript(javascript)) return javascript;
  return chooseReading(javascript, transformTypeScript(source, options.exactTypeScript === true));
}

/** The TypeScript half of {@link transformCode}, for source that does not parse as JavaScript. */
export function transformTypeScript(source: string, exact: boolean): TransformResult {
  if (bracketDepth(source, MAX_TYPESCRIPT_NESTING) > MAX_TYPESCRIPT_NESTING) return tooDeep();
  try {
    const erased = exact ? undefined : strip(source, "strip-only");
    if (erased !== undefined && !("diagnostic" in erased)) {
      const program = parseScript(erased.code);
      // Erased output that acorn rejects (an ASI or line-break hazard) takes the exact path.
      if (program !== undefined)
        return { ...rewriteDeclarations(erased.code, program), language: "typescript", stripping: "erased" };
    }
    return transpileTypeScript(source);
  } catch (error) {
    return nestedTooDeeply(error);
  }
}

// ---------------------------------------------------------------------------------------------
// The stripper instance.

const requireHere = createRequire(import.meta.url);
const STRIPPER_PATH = requireHere.resolve("@swc/wasm-typescript");
let stripper: typeof Swc | undefined;

/** What swc throws for code it cannot parse: a plain object, not an `Error`. */
interface Diagnostic {
  message: string;
  startLine: number;
  startColumn: number;
}

function isDiagnostic(value: unknown): value is Diagnostic {
  const candidate = value as Partial<Diagnostic> | null;
  return (
    typeof candidate === "object" &&
    candidate !== null &&
    !(candidate instanceof Error) &&
    typeof candidate.message === "string" &&
    typeof candidate.startLine === "number"
  );
}

/**
 * swc's output for `source`, or the diagnostic it gave. Any other failure (a WebAssembly trap, a
 * host stack overflow inside the instance) discards the instance, whose memory and stack pointer it
 * may have left broken, so the next call loads a fresh one; it is then rethrown as a `RangeError`
 * (nesting too deep, the only cause seen).
 */
function strip(source: string, mode: "strip-only" | "transform"): Swc.TransformOutput | { diagnostic: Diagnostic } {
  stripper ??= requireHere(STRIPPER_PATH) as typeof Swc;
  try {
    return stripper.transformSync(source, {
      mode,
      filename: "eval.ts",
      module: true,
      sourceMap: mode === "transform",
      transform: { nativeClassProperties: true, noEmptyExport: true },
    });
  } catch (error) {
    if (isDiagnostic(error)) return { diagnostic: error };
    stripper = undefined;
    delete requireHere.cache[STRIPPER_PATH];
    throw new RangeError(`the TypeScript stripper failed: ${error instanceof Error ? error.message : String(error)}`);
  }
}

/**
 * The deepest nesting of `(`, `[`, `{` and template `${` in `source` outside strings and comments,
 * or the first depth past `limit`. One linear pass; regular expressions count as code.
 */
export function bracketDepth(source: string, limit: number): number {
  let depth = 0;
  let deepest = 0;
  // Depths at which open template substitutions (`${`) started: their `}` resumes the template.
  const templates: number[] = [];
  const open = (): void => {
    depth++;
    deepest = Math.max(deepest, depth);
  };
  const openSubstitution = (): void => {
    open();
    templates.push(depth);
  };
  for (let i = 0; i < source.length && deepest <= limit; i++) {
    const char = source[i];
    if (char === "(" || char === "[" || char === "{") open();
    else if (char === ")" || char === "]") depth--;
    else if (char === "}") {
      const resumesTemplate = templates.at(-1) === depth;
      depth--;
      if (resumesTemplate) {
        templates.pop();
        i = templateRest(source, i + 1, openSubstitution);
      }
    } else if (char === "`") i = templateRest(source, i + 1, openSubstitution);
    else if (char === '"' || char === "'") {
      for (i++; i < source.length && source[i] !== char && source[i] !== "\n"; i++) if (source[i] === "\\") i++;
    } else if (char === "/" && source[i + 1] === "/") {
      const end = source.indexOf("\n", i);
      i = end === -1 ? source.length : end;
    } else if (char === "/" && source[i + 1] === "*") {
      const end = source.indexOf("*/", i + 2);
      i = end === -1 ? source.length : end + 1;
    }
  }
  return deepest;
}

/** Index of the template's closing backtick, or of the `{` of a `${` (after calling `open`), from `from` on. */
function templateRest(source: string, from: number, open: () => void): number {
  for (let i = from; i < source.length; i++) {
    if (source[i] === "\\") i++;
    else if (source[i] === "`") return i;
    else if (source[i] === "$" && source[i + 1] === "{") {
      open();
      return i + 1;
    }
  }
  return source.length;
}

// ---------------------------------------------------------------------------------------------
// Compiling what cannot be erased.

function transpileTypeScript(source: string): TransformResult {
  const output = strip(source, "transform");
  if ("diagnostic" in output) return syntaxErrorResult(output.diagnostic);
  const emitted = output.code;
  const lineTable = output.map ? lineTableFromSourceMap(output.map) : undefined;
  const program = parseScript(emitted);
  // Output acorn cannot read (e.g. `export` in a script) is left for the engine to reject.
  const rewritten = program ? rewriteDeclarations(emitted, program) : { code: emitted, declaredNames: [] };
  const result: TransformResult = { ...rewritten, language: "typescript", stripping: "transpiled" };
  if (lineTable) Object.assign(result, { lineTable, lineMap: lineMapOf(lineTable) });
  return result;
}

function syntaxErrorResult(diagnostic: Diagnostic): TransformResult {
  const line = diagnostic.startLine;
  const column = diagnostic.startColumn + 1;
  return {
    ...failedParse(`${diagnostic.message} (line ${line}, column ${column})`, line, column, "typescript"),
    stripping: "transpiled",
  };
}

type MappedSegment = Exclude<SourceMapSegment, [number]>;

/** The model's 1-based line of each emitted line: the source line of the line's first mapped segment. */
function lineTableFromSourceMap(sourceMapText: string): number[] | undefined {
  const mappings = (JSON.parse(sourceMapText) as { mappings?: unknown }).mappings;
  if (typeof mappings !== "string") return undefined;
  let lastKnown = 0;
  return decode(mappings).map((segments) => {
    const mapped = segments.find((segment): segment is MappedSegment => segment.length >= 4);
    // Unmapped emitted lines (helpers, closing braces) belong to the nearest line above.
    if (mapped !== undefined) lastKnown = mapped[2];
    return lastKnown + 1;
  });
}
