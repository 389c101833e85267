/**
 * Turns the code a model wrote for one eval into a global script for the engine.
 *
 * Two jobs:
 * - **Type stripping.** TypeScript goes through the `typescript` package's `transpileModule`
 *   (correct for `enum`, `namespace`, parameter properties, `abstract`, `satisfies`, `as`, `!`,
 *   generics). It costs milliseconds, so plain JavaScript skips it: if acorn parses the source as a
 *   script, it is JavaScript.
 * - **Declaration persistence.** The engine runs the result as a global script with top-level
 *   `await`, so the last statement's completion value is the result. Top-level `let`/`const` and
 *   `class` declarations would become global *lexical* bindings, which a later eval may not
 *   re-declare; REPL-style, they are rewritten to `var` (a global object property, re-declarable,
 *   and a declaration keeps its empty completion value). `function` declarations are already
 *   var-scoped and hoisted and stay as written.
 *
 * Lines are kept where they were: the JavaScript path edits only within a line, the TypeScript path
 * maps emitted lines back through the source map ({@link TransformResult.lineMap}).
 */
import { createRequire } from "node:module";
import { parse, type Options as AcornOptions, type Pattern, type Program } from "acorn";
import type * as TS from "typescript";

/** What {@link transformCode} produced. */
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
  /**
   * JavaScript source of each top-level `function` and `class` declaration, by name, so a snapshot
   * can re-create them. The last declaration of a name wins, as it does at run time.
   */
  declaredSources?: Record<string, string>;
  /** Whether the source was plain JavaScript or needed type stripping. */
  language: "javascript" | "typescript";
  /**
   * How types were stripped: `"erased"` (annotations replaced by spaces, every position kept) or
   * `"transpiled"` (`transpileModule`, for `enum`, `namespace`, parameter properties and the like).
   */
  stripping?: "erased" | "transpiled";
  /**
   * Set when the source is not valid JavaScript or TypeScript. {@link code} then throws a
   * `SyntaxError` carrying this message, on the offending line.
   */
  syntaxError?: { message: string; line: number; column: number };
}

const ACORN_OPTIONS: AcornOptions = {
  ecmaVersion: "latest",
  sourceType: "script",
  allowAwaitOutsideFunction: true,
  allowHashBang: true,
};

/** Options of {@link transformCode}. */
export interface TransformOptions {
  /** Always strip TypeScript with `transpileModule` (milliseconds), never by erasing in place. */
  exactTypeScript?: boolean;
}

/** Transforms one eval's source. Never throws on bad input: syntax errors surface when the script runs. */
export function transformCode(source: string, options: TransformOptions = {}): TransformResult {
  try {
    // JavaScript keeps its JavaScript meaning: `a < b > (c)` is two comparisons, even though it reads
    // like type arguments. TypeScript is tried only for what JavaScript cannot parse.
    const program = parseScript(source);
    if (program !== undefined) return { ...rewriteDeclarations(source, program), language: "javascript" };
    return transformTypeScript(source, options.exactTypeScript === true);
  } catch (error) {
    // The parsers recurse per nesting level: thousands of `(` overflow the host stack.
    if (error instanceof RangeError) return failedParse(TOO_DEEP_MESSAGE, 1, 1, "javascript");
    throw error;
  }
}

const TOO_DEEP_MESSAGE = "the code is nested too deeply to parse (brackets, parentheses or blocks thousands of levels deep)";

// ---------------------------------------------------------------------------------------------
// JavaScript: top-level declarations become re-declarable globals.

interface Rewritten {
  code: string;
  declaredNames: string[];
  declaredSources?: Record<string, string>;
}

interface Edit {
  at: number;
  /** Characters of the original removed at `at`. */
  remove: number;
  insert: string;
}

function parseScript(source: string): Program | undefined {
  try {
    return parse(source, ACORN_OPTIONS);
  } catch (error) {
    if (error instanceof RangeError) throw error; // nesting too deep: no parser will do better
    return undefined;
  }
}

function rewriteDeclarations(source: string, program: Program): Rewritten {
  const names = new Set<string>();
  let sources: Record<string, string> | undefined;
  const edits: Edit[] = [];
  for (const statement of program.body) {
    if (statement.type === "VariableDeclaration") {
      for (const declarator of statement.declarations) collectBindingNames(declarator.id, names);
      const kind = statement.kind;
      // `const` -> `var  ` keeps every column of the line in place.
      if (kind === "let" || kind === "const") edits.push({ at: statement.start, remove: kind.length, insert: "var".padEnd(kind.length) });
    } else if (statement.type === "FunctionDeclaration" || statement.type === "ClassDeclaration") {
      const name = statement.id.name;
      names.add(name);
      sources ??= {};
      sources[name] = source.slice(statement.start, statement.end);
      if (statement.type === "ClassDeclaration") {
        // The `;` stops a following `(`/`[` line from continuing the class expression.
        edits.push({ at: statement.start, remove: 0, insert: `var ${name} = ` }, { at: statement.end, remove: 0, insert: ";" });
      }
    }
  }
  const result: Rewritten = { code: applyEdits(source, edits), declaredNames: [...names] };
  if (sources) result.declaredSources = sources;
  return result;
}

function collectBindingNames(pattern: Pattern | null, into: Set<string>): void {
  switch (pattern?.type) {
    case "Identifier":
      into.add(pattern.name);
      break;
    case "ObjectPattern":
      for (const property of pattern.properties) collectBindingNames(property.type === "RestElement" ? property.argument : property.value, into);
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

// ---------------------------------------------------------------------------------------------
// TypeScript: `transpileModule`, then the JavaScript rewrite on its output.

type TypeScriptModule = typeof TS;
let typescript: TypeScriptModule | undefined;

function loadTypeScript(): TypeScriptModule {
  // Loaded on first use: most evals are plain JavaScript and never pay for it.
  typescript ??= createRequire(import.meta.url)("typescript") as TypeScriptModule;
  return typescript;
}

function transformTypeScript(source: string, exact: boolean): TransformResult {
  const ts = loadTypeScript();
  const blanked = exact ? undefined : blankErasableTypes(ts, source);
  const program = blanked === undefined ? undefined : parseScript(blanked);
  // Blanked output that acorn rejects (an ASI or line-break hazard) takes the slow, exact path.
  if (blanked !== undefined && program !== undefined) return { ...rewriteDeclarations(blanked, program), language: "typescript", stripping: "erased" };
  return transpileTypeScript(ts, source);
}

function transpileTypeScript(ts: TypeScriptModule, source: string): TransformResult {
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
  if (diagnostic) return syntaxErrorResult(ts, source, diagnostic);

  const emitted = output.outputText.replace(/\n?\/\/# sourceMappingURL=.*\s*$/, "");
  const lineTable = output.sourceMapText ? lineTableFromSourceMap(output.sourceMapText) : undefined;
  const program = parseScript(emitted);
  // Output acorn cannot read (e.g. `export` in a script) is left for the engine to reject.
  const rewritten = program ? rewriteDeclarations(emitted, program) : { code: emitted, declaredNames: [] };
  const result: TransformResult = { ...rewritten, language: "typescript", stripping: "transpiled" };
  if (lineTable) Object.assign(result, { lineTable, lineMap: lineMapOf(lineTable) });
  return result;
}

function syntaxErrorResult(ts: TypeScriptModule, source: string, diagnostic: TS.Diagnostic): TransformResult {
  const file = diagnostic.file ?? ts.createSourceFile("eval.ts", source, ts.ScriptTarget.ESNext);
  const position = ts.getLineAndCharacterOfPosition(file, diagnostic.start ?? 0);
  const line = position.line + 1;
  const column = position.character + 1;
  const message = `${ts.flattenDiagnosticMessageText(diagnostic.messageText, " ")} (line ${line}, column ${column})`;
  return { ...failedParse(message, line, column, "typescript"), stripping: "transpiled" };
}

/** A result that throws `SyntaxError: message` from `line` when run. */
export function failedParse(message: string, line: number, column: number, language: TransformResult["language"]): TransformResult {
  // Thrown from the offending line so the stack trace points at it, with the parser's own words.
  const code = `${"\n".repeat(line - 1)}throw new SyntaxError(${JSON.stringify(message)});`;
  return { code, declaredNames: [], language, syntaxError: { message, line, column } };
}

// ---------------------------------------------------------------------------------------------
// Erasable TypeScript: types replaced by spaces, every position kept (no source map needed).
//
// `transpileModule` builds a program and a type checker for every call (milliseconds); most
// model-written TypeScript only annotates, which TypeScript's parser alone can erase in tens of
// microseconds. Anything that is not pure annotation (`enum`, `namespace`, parameter properties,
// `<T>x` assertions, `import x = require()`) bails out to `transpileModule`.

class NotErasable extends Error {}

/** A next line that would continue an expression left open by erasing the type before it. */
const CONTINUES_PREVIOUS_LINE = /^[ \t]*(?:\/\/[^\n]*)?\r?\n\s*[([`+\-/]/;

interface Blank {
  start: number;
  end: number;
  /** Put `;` first, so a removed statement or class member still ends the one before it. */
  separator: boolean;
}

function blankErasableTypes(ts: TypeScriptModule, source: string): string | undefined {
  const file = ts.createSourceFile("eval.ts", source, { languageVersion: ts.ScriptTarget.ESNext, jsDocParsingMode: ts.JSDocParsingMode.ParseNone }, true, ts.ScriptKind.TS);
  // Not public API, but the only cheap way to learn about syntax errors; without it, take the exact path.
  const diagnostics = (file as unknown as { parseDiagnostics?: unknown }).parseDiagnostics;
  if (!Array.isArray(diagnostics) || diagnostics.length > 0) return undefined;
  const blanks: Blank[] = [];
  const K = ts.SyntaxKind;
  const startOf = (node: TS.Node): number => node.getStart(file);
  const blankNode = (node: TS.Node, separator: boolean): void => {
    blanks.push({ start: startOf(node), end: node.end, separator });
  };
  const expectChar = (at: number, char: string): number => {
    if (source[at] !== char) throw new NotErasable();
    return at;
  };
  /** `<...>` around a type parameter or argument list. */
  const blankAngleList = (list: TS.NodeArray<TS.Node>): void => {
    let open = list.pos - 1;
    while (open > 0 && /\s/.test(source[open] ?? "")) open--;
    let close = list.end;
    while (close < source.length && /[\s,]/.test(source[close] ?? "")) close++;
    blanks.push({ start: expectChar(open, "<"), end: expectChar(close, ">") + 1, separator: false });
  };
  /** `: Type` of an annotation. */
  const blankAnnotation = (type: TS.TypeNode): void => {
    let colon = startOf(type) - 1;
    while (colon > 0 && /\s/.test(source[colon] ?? "")) colon--;
    blanks.push({ start: expectChar(colon, ":"), end: type.end, separator: false });
  };
  const hasModifier = (node: TS.Node, kind: TS.SyntaxKind): boolean =>
    ts.canHaveModifiers(node) && (ts.getModifiers(node)?.some((modifier) => modifier.kind === kind) ?? false);
  const TYPE_ONLY_MODIFIERS = new Set<TS.SyntaxKind>([K.PublicKeyword, K.PrivateKeyword, K.ProtectedKeyword, K.ReadonlyKeyword, K.OverrideKeyword, K.AbstractKeyword]);

  const visit = (node: TS.Node): void => {
    switch (node.kind) {
      case K.InterfaceDeclaration:
      case K.TypeAliasDeclaration:
        return blankNode(node, true);
      case K.EnumDeclaration:
      case K.ModuleDeclaration:
        if (hasModifier(node, K.DeclareKeyword)) return blankNode(node, true);
        throw new NotErasable();
      case K.ImportEqualsDeclaration:
      case K.ExportAssignment:
      case K.TypeAssertionExpression:
      case K.NamespaceExportDeclaration:
        throw new NotErasable();
      case K.ImportDeclaration:
        if ((node as TS.ImportDeclaration).importClause?.isTypeOnly) return blankNode(node, true);
        break;
      case K.ExportDeclaration:
        if ((node as TS.ExportDeclaration).isTypeOnly) return blankNode(node, true);
        break;
      case K.AsExpression:
      case K.SatisfiesExpression: {
        // `x as T` + newline + `[1].map(...)`: a type ends at the line break, but once the type is
        // gone `x[1]` would continue the expression.
        if (CONTINUES_PREVIOUS_LINE.test(source.slice(node.end, node.end + 200))) throw new NotErasable();
        const expression = (node as TS.AsExpression | TS.SatisfiesExpression).expression;
        blanks.push({ start: expression.end, end: node.end, separator: false });
        return visit(expression);
      }
      case K.NonNullExpression:
        blanks.push({ start: expectChar(node.end - 1, "!"), end: node.end, separator: false });
        return visit((node as TS.NonNullExpression).expression);
      case K.HeritageClause:
        if ((node as TS.HeritageClause).token === K.ImplementsKeyword) return blankNode(node, false);
        break;
      case K.ExpressionWithTypeArguments: {
        const withArguments = node as TS.ExpressionWithTypeArguments;
        if (withArguments.typeArguments) blankAngleList(withArguments.typeArguments);
        return visit(withArguments.expression);
      }
      case K.IndexSignature:
        return blankNode(node, true);
      case K.Parameter: {
        const parameter = node as TS.ParameterDeclaration;
        // Parameter properties assign fields; `this` parameters need the comma removed too.
        if (ts.getModifiers(parameter)?.some((modifier) => TYPE_ONLY_MODIFIERS.has(modifier.kind))) throw new NotErasable();
        if (ts.isIdentifier(parameter.name) && parameter.name.escapedText === "this") throw new NotErasable();
        break;
      }
      default:
        if (ts.isTypeNode(node) || node.kind === K.TypeParameter) return;
    }
    if (hasModifier(node, K.DeclareKeyword)) return blankNode(node, true);
    const isClassMember = node.parent !== undefined && ts.isClassLike(node.parent) && ts.isClassElement(node);
    if (isClassMember && hasModifier(node, K.AbstractKeyword)) return blankNode(node, true);
    // Overload signatures: a function, method or constructor without a body.
    if ((ts.isFunctionDeclaration(node) || ts.isMethodDeclaration(node) || ts.isConstructorDeclaration(node)) && node.body === undefined) return blankNode(node, true);
    if (ts.canHaveModifiers(node)) {
      // A member's leading modifier becomes `;`: `a = 1` + newline + `private [k] = 2` must not
      // read as `a = 1[k] = 2`. Not after a decorator, which must stay attached.
      const leadingSeparator = !ts.canHaveDecorators(node) || (ts.getDecorators(node)?.length ?? 0) === 0;
      (ts.getModifiers(node) ?? []).forEach((modifier, index) => {
        if (TYPE_ONLY_MODIFIERS.has(modifier.kind)) blanks.push({ start: startOf(modifier), end: modifier.end, separator: index === 0 && leadingSeparator });
      });
    }
    const parts = node as Partial<{
      typeParameters: TS.NodeArray<TS.TypeParameterDeclaration>;
      typeArguments: TS.NodeArray<TS.TypeNode>;
      type: TS.TypeNode;
      questionToken: TS.QuestionToken;
      exclamationToken: TS.ExclamationToken;
    }>;
    if (parts.typeParameters) blankAngleList(parts.typeParameters);
    if (parts.typeArguments) blankAngleList(parts.typeArguments);
    if (parts.type && ANNOTATED.has(node.kind)) blankAnnotation(parts.type);
    if (parts.questionToken && OPTIONAL_MARKED.has(node.kind)) blankNode(parts.questionToken, false);
    if (parts.exclamationToken) blankNode(parts.exclamationToken, false);
    ts.forEachChild(node, visit);
  };
  const ANNOTATED = new Set<TS.SyntaxKind>([
    K.VariableDeclaration, K.Parameter, K.PropertyDeclaration, K.FunctionDeclaration, K.FunctionExpression, K.ArrowFunction,
    K.MethodDeclaration, K.GetAccessor, K.SetAccessor, K.Constructor,
  ]);
  // `?.` is a QuestionDotToken; only these `?` are optionality markers.
  const OPTIONAL_MARKED = new Set<TS.SyntaxKind>([K.Parameter, K.PropertyDeclaration, K.MethodDeclaration]);

  try {
    ts.forEachChild(file, visit);
  } catch (error) {
    if (error instanceof NotErasable) return undefined;
    throw error;
  }
  return applyBlanks(source, blanks);
}

function applyBlanks(source: string, blanks: Blank[]): string {
  blanks.sort((a, b) => a.start - b.start);
  let out = "";
  let cursor = 0;
  for (const blank of blanks) {
    if (blank.end <= cursor) continue;
    const start = Math.max(blank.start, cursor);
    out += source.slice(cursor, start);
    // Line breaks stay, so every later line keeps its number.
    const spaced = source.slice(start, blank.end).replace(/[^\r\n]/g, " ");
    out += blank.separator && start === blank.start ? `;${spaced.slice(1)}` : spaced;
    cursor = blank.end;
  }
  return out + source.slice(cursor);
}

// ---------------------------------------------------------------------------------------------
// Source map lines (only what a line map needs: generated line -> first mapped source line).

const BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const BASE64_VALUE = new Map([...BASE64].map((char, index) => [char, index]));

/** Maps a generated line through a {@link TransformResult.lineTable}. */
export function lineMapOf(lines: readonly number[]): (generatedLine: number) => number {
  return (generatedLine) => lines[generatedLine - 1] ?? lines[lines.length - 1] ?? generatedLine;
}

function lineTableFromSourceMap(sourceMapText: string): number[] | undefined {
  const mappings = (JSON.parse(sourceMapText) as { mappings?: unknown }).mappings;
  if (typeof mappings !== "string") return undefined;
  const lines: number[] = [];
  let sourceLine = 0;
  let lastKnown = 0;
  for (const lineMappings of mappings.split(";")) {
    let firstLineOfThisLine: number | undefined;
    for (const segment of lineMappings.split(",")) {
      if (segment === "") continue;
      const fields = decodeVlq(segment);
      // Fields: generated column, source index, source line, source column[, name]; all deltas.
      if (fields.length >= 4) {
        sourceLine += fields[2] ?? 0;
        firstLineOfThisLine ??= sourceLine;
      }
    }
    // Unmapped emitted lines (helpers, closing braces) belong to the nearest line above.
    if (firstLineOfThisLine !== undefined) lastKnown = firstLineOfThisLine;
    lines.push(lastKnown + 1);
  }
  return lines;
}

function decodeVlq(segment: string): number[] {
  const values: number[] = [];
  let value = 0;
  let shift = 0;
  for (const char of segment) {
    const digit = BASE64_VALUE.get(char);
    if (digit === undefined) break;
    value += (digit & 31) << shift;
    if (digit & 32) {
      shift += 5;
      continue;
    }
    values.push(value & 1 ? -(value >>> 1) : value >>> 1);
    value = 0;
    shift = 0;
  }
  return values;
}
