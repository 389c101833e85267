/**
 * Turns the code a model wrote for one eval into a global script for the engine.
 *
 * Two jobs:
 * - **Type stripping.** Plain JavaScript skips it: if acorn parses the source as a script, it is
 *   JavaScript. Erasable TypeScript (annotations, `interface`, `as`, `!`, generics, overloads) goes
 *   through `ts-blank-space`, which replaces types with spaces so every line keeps its number.
 *   What has run-time meaning (`enum`, `namespace`, parameter properties, `<T>x` assertions) goes
 *   through the `typescript` package's `transpileModule` (milliseconds), whose emitted lines are
 *   mapped back through its source map ({@link TransformResult.lineMap}).
 * - **Declaration persistence**, in `transform-javascript.ts`, on the resulting JavaScript.
 *
 * This module loads `typescript` when imported; `transformCodeLazily` (`transform-javascript.ts`)
 * imports it only for code that is not JavaScript.
 */
import { decode, type SourceMapSegment } from "@jridgewell/sourcemap-codec";
import { blankSourceFile } from "ts-blank-space";
import ts from "typescript";
import { chooseReading, failedParse, lineMapOf, needsTypeScript, nestedTooDeeply, parseScript, rewriteDeclarations, type TransformResult, transformJavaScript } from "./transform-javascript.js";

/** Options of {@link transformCode}. */
export interface TransformOptions {
  /** Always strip TypeScript with `transpileModule` (milliseconds), never by erasing in place. */
  exactTypeScript?: boolean;
}

/** Transforms one eval's source. Never throws on bad input: syntax errors surface when the script runs. */
export function transformCode(source: string, options: TransformOptions = {}): TransformResult {
  const javascript = transformJavaScript(source);
  if (!needsTypeScript(javascript)) return javascript;
  return chooseReading(javascript, transformTypeScript(source, options.exactTypeScript === true));
}

/** The TypeScript half of {@link transformCode}, for source that does not parse as JavaScript. */
export function transformTypeScript(source: string, exact: boolean): TransformResult {
  try {
    const erased = exact ? undefined : eraseTypes(source);
    const program = erased === undefined ? undefined : parseScript(erased);
    // Erased output that acorn rejects (an ASI or line-break hazard) takes the slow, exact path.
    if (erased !== undefined && program !== undefined) return { ...rewriteDeclarations(erased, program), language: "typescript", stripping: "erased" };
    return transpileTypeScript(source);
  } catch (error) {
    return nestedTooDeeply(error);
  }
}

/**
 * The source with its types replaced by spaces, or `undefined` when it has a syntax error or syntax
 * with run-time meaning (which `transpileModule` handles, and reports errors for).
 */
function eraseTypes(source: string): string | undefined {
  const file = ts.createSourceFile("eval.ts", source, { languageVersion: ts.ScriptTarget.ESNext, jsDocParsingMode: ts.JSDocParsingMode.ParseNone }, false, ts.ScriptKind.TS);
  // Not public API, but the only cheap way to learn about syntax errors; without it, take the exact path.
  const diagnostics = (file as unknown as { parseDiagnostics?: unknown }).parseDiagnostics;
  if (!Array.isArray(diagnostics) || diagnostics.length > 0) return undefined;
  let erasable = true;
  const erased = blankSourceFile(file, () => {
    erasable = false;
  });
  return erasable ? erased : undefined;
}

function transpileTypeScript(source: string): TransformResult {
  const output = ts.transpileModule(source, {
    fileName: "eval.ts",
    reportDiagnostics: true,
    compilerOptions: {
      target: ts.ScriptTarget.ESNext,
      module: ts.ModuleKind.Preserve,
      isolatedModules: true,
      sourceMap: true,
      inlineSources: false,
      removeComments: false,
      alwaysStrict: false,
      useDefineForClassFields: true,
    },
  });
  const diagnostic = output.diagnostics?.find((d) => d.category === ts.DiagnosticCategory.Error && d.start !== undefined);
  if (diagnostic) return syntaxErrorResult(source, diagnostic);

  const emitted = output.outputText.replace(/\n?\/\/# sourceMappingURL=.*\s*$/, "");
  const lineTable = output.sourceMapText ? lineTableFromSourceMap(output.sourceMapText) : undefined;
  const program = parseScript(emitted);
  // Output acorn cannot read (e.g. `export` in a script) is left for the engine to reject.
  const rewritten = program ? rewriteDeclarations(emitted, program) : { code: emitted, declaredNames: [] };
  const result: TransformResult = { ...rewritten, language: "typescript", stripping: "transpiled" };
  if (lineTable) Object.assign(result, { lineTable, lineMap: lineMapOf(lineTable) });
  return result;
}

function syntaxErrorResult(source: string, diagnostic: ts.Diagnostic): TransformResult {
  const file = diagnostic.file ?? ts.createSourceFile("eval.ts", source, ts.ScriptTarget.ESNext);
  const position = ts.getLineAndCharacterOfPosition(file, diagnostic.start ?? 0);
  const line = position.line + 1;
  const column = position.character + 1;
  const message = `${ts.flattenDiagnosticMessageText(diagnostic.messageText, " ")} (line ${line}, column ${column})`;
  return { ...failedParse(message, line, column, "typescript"), stripping: "transpiled" };
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
