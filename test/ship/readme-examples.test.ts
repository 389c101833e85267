/**
 * Every ```js / ```ts block of README.md runs, as its own ES module in a child Node process,
 * against the built package (imports of "quickjs-native" resolve to dist/ by self-reference).
 *
 * Expected values are written in the blocks as `// =>` comments, shown the way Node's
 * util.inspect prints them:
 *
 *     sandbox.evalSync("1 + 1"); // => 2
 *     const total = sum([1, 2]); // => 3          (a declaration checks the declared variable)
 *     someCall()
 *     // => Map(2) { 'alpha' => 29, 'beta' => 13 }  (a comment line checks the statement above)
 *     //    continued expected text goes on comment lines indented past `//`
 *
 * Each comment becomes a check on the statement it follows; whitespace differences are ignored,
 * anything else fails the test, and so does a `// =>` that is never reached or that follows
 * something other than an expression or a single-variable declaration. A block preceded by
 * `<!-- readme-test: skip <reason> -->` is only parsed (for examples that need an API key).
 */
import { spawn } from "node:child_process";
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
const CHECKED_MARK = "__README_CHECKED__";

/** One fenced code block of the README. */
interface Block {
  lang: "js" | "ts";
  /** README line of the block's first code line (1-based). */
  line: number;
  code: string;
  skip?: string;
}

/** The ```js/```ts blocks of a markdown text, with their README line numbers. */
function extractBlocks(markdown: string): Block[] {
  const lines = markdown.split("\n");
  const blocks: Block[] = [];
  for (let i = 0; i < lines.length; i++) {
    const open = /^(\s*)(```+|~~~+)\s*(js|javascript|mjs|ts|typescript)\b/.exec(lines[i]!);
    if (!open) {
      if (/^\s*(```+|~~~+)/.test(lines[i]!)) {
        // Another language's block: skip to its closing fence so its content is not read as markdown.
        const fence = /^\s*(```+|~~~+)/.exec(lines[i]!)![1]!;
        for (i++; i < lines.length && !lines[i]!.trim().startsWith(fence); i++);
      }
      continue;
    }
    const fence = open[2]!;
    const start = i + 1;
    let end = start;
    while (end < lines.length && !lines[end]!.trim().startsWith(fence)) end++;
    let prev = i - 1;
    while (prev >= 0 && lines[prev]!.trim() === "") prev--;
    const skip = prev >= 0 ? /<!--\s*readme-test:\s*skip\s+(.+?)\s*-->/.exec(lines[prev]!)?.[1] : undefined;
    const lang = /^(ts|typescript)$/.test(open[3]!) ? "ts" : "js";
    blocks.push({ lang, line: start + 1, code: lines.slice(start, end).join("\n"), ...(skip ? { skip } : {}) });
    i = end;
  }
  return blocks;
}

/** A parse of one block, with every statement and every string-like literal range. */
function parse(block: Block): { source: ts.SourceFile; statements: ts.Statement[]; literals: Array<[number, number]> } {
  const source = ts.createSourceFile(
    `block.${block.lang}`,
    block.code,
    ts.ScriptTarget.ES2022,
    true,
    block.lang === "ts" ? ts.ScriptKind.TS : ts.ScriptKind.JS,
  );
  const statements: ts.Statement[] = [];
  const literals: Array<[number, number]> = [];
  const visit = (node: ts.Node): void => {
    if (ts.isStatement(node) || ts.isVariableStatement(node)) statements.push(node as ts.Statement);
    if (ts.isStringLiteral(node) || ts.isTemplateLiteralToken(node) || ts.isRegularExpressionLiteral(node))
      literals.push([node.getStart(source), node.end]);
    ts.forEachChild(node, visit);
  };
  visit(source);
  return { source, statements, literals };
}

/** Syntax errors TypeScript's parser found in a block. */
function syntaxErrors(block: Block): string[] {
  const { source } = parse(block);
  const diagnostics = (source as unknown as { parseDiagnostics?: ts.Diagnostic[] }).parseDiagnostics ?? [];
  return diagnostics.map(
    (d) =>
      `${ts.flattenDiagnosticMessageText(d.messageText, "\n")} (README line ${block.line + source.getLineAndCharacterOfPosition(d.start ?? 0).line})`,
  );
}

/** An expected value: README line, and the text after `// =>`. */
interface Expectation {
  line: number;
  expected: string;
}

/**
 * Rewrites a block into a module that checks each `// =>` comment, and lists the checks it
 * must reach. Throws when a comment does not follow a checkable statement.
 */
function instrument(block: Block): { module: string; expectations: Expectation[] } {
  const { source, statements, literals } = parse(block);
  const code = block.code;
  const edits: Array<{ at: number; end: number; text: string }> = [];
  const expectations: Expectation[] = [];
  const lineStarts = source.getLineStarts();
  const lines = code.split("\n");
  for (let l = 0; l < lines.length; l++) {
    const m = /\/\/ =>(.*)$/.exec(lines[l]!);
    if (!m) continue;
    const pos = lineStarts[l]! + m.index;
    if (literals.some(([a, b]) => pos >= a && pos < b)) continue; // `// =>` inside a string
    let expected = m[1]!.trim();
    // Continuation lines: comment lines indented past `//` that are not a new `// =>`.
    let last = l;
    while (last + 1 < lines.length && /^\s*\/\/\s{2,}\S/.test(lines[last + 1]!) && !/\/\/ =>/.test(lines[last + 1]!)) {
      expected += ` ${lines[last + 1]!.replace(/^\s*\/\//, "").trim()}`;
      last++;
    }
    const readmeLine = block.line + l;
    const target = statements
      .filter((s) => s.end <= pos && code.slice(s.end, pos).trim() === "")
      .sort((a, b) => b.end - a.end || a.getStart(source) - b.getStart(source))[0];
    const where = `README line ${readmeLine}`;
    if (!target) throw new Error(`${where}: \`// =>\` does not follow a statement`);
    const id = expectations.length;
    expectations.push({ line: readmeLine, expected });
    const check = (expr: string): string => `__readmeCheck(${expr}, ${JSON.stringify(expected)}, ${readmeLine}, ${id})`;
    if (ts.isExpressionStatement(target)) {
      const expr = target.expression;
      const text = code.slice(expr.getStart(source), expr.end);
      edits.push({ at: expr.getStart(source), end: expr.end, text: check(`(${text})`) });
    } else if (
      ts.isVariableStatement(target) &&
      target.declarationList.declarations.length === 1 &&
      ts.isIdentifier(target.declarationList.declarations[0]!.name)
    ) {
      const name = target.declarationList.declarations[0]!.name.text;
      edits.push({ at: target.end, end: target.end, text: ` ${check(name)};` });
    } else {
      throw new Error(
        `${where}: \`// =>\` must follow an expression statement or a single-variable declaration, not a ${ts.SyntaxKind[target.kind]}`,
      );
    }
  }
  let instrumented = code;
  for (const e of edits.sort((a, b) => b.at - a.at))
    instrumented = instrumented.slice(0, e.at) + e.text + instrumented.slice(e.end);
  const js = ts.transpileModule(instrumented, {
    compilerOptions: { target: ts.ScriptTarget.ES2022, module: ts.ModuleKind.ESNext, sourceMap: false },
    fileName: `block.${block.lang}`,
  }).outputText;
  const helper = `
import { inspect as __readmeInspect } from "node:util";
const __readmeReached = new Set();
const __readmeNorm = (s) => s.replace(/\\s+/g, " ").trim();
function __readmeCheck(actual, expected, line, id) {
  __readmeReached.add(id);
  const shown = __readmeInspect(actual, { depth: Infinity, breakLength: Infinity, maxArrayLength: Infinity, maxStringLength: Infinity });
  if (__readmeNorm(shown) !== __readmeNorm(expected)) {
    throw new Error("README line " + line + ": expected " + expected + "\\n  but got " + shown);
  }
  return actual;
}
process.on("exit", () => console.log(${JSON.stringify(CHECKED_MARK)} + JSON.stringify([...__readmeReached])));
`;
  return { module: `${helper}\n${js}`, expectations };
}

interface RunResult {
  code: number | null;
  stdout: string;
  stderr: string;
  reached: number[];
}

/** Runs one instrumented module from a directory inside the package (so self-reference resolves). */
function runModule(dir: string, name: string, module: string): Promise<RunResult> {
  const file = join(dir, `${name}.mjs`);
  writeFileSync(file, module);
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [file], { cwd: root, stdio: ["ignore", "pipe", "pipe"] });
    let stdout = "";
    let stderr = "";
    const timer = setTimeout(() => child.kill("SIGKILL"), 60_000);
    child.stdout.setEncoding("utf8").on("data", (d: string) => (stdout += d));
    child.stderr.setEncoding("utf8").on("data", (d: string) => (stderr += d));
    child.on("error", reject);
    child.on("close", (code) => {
      clearTimeout(timer);
      const mark = stdout.lastIndexOf(CHECKED_MARK);
      const reached =
        mark >= 0 ? (JSON.parse(stdout.slice(mark + CHECKED_MARK.length).split("\n")[0]!) as number[]) : [];
      resolve({ code, stdout: mark >= 0 ? stdout.slice(0, mark) : stdout, stderr, reached });
    });
  });
}

/** Runs a block and returns what went wrong, or undefined when it ran and every check held. */
async function failureOf(dir: string, name: string, block: Block): Promise<string | undefined> {
  let instrumented: ReturnType<typeof instrument>;
  try {
    instrumented = instrument(block);
  } catch (err) {
    return (err as Error).message;
  }
  const r = await runModule(dir, name, instrumented.module);
  if (r.code !== 0) return `exit code ${r.code}\n${r.stderr}`;
  const missed = instrumented.expectations.filter((_, id) => !r.reached.includes(id));
  if (missed.length)
    return `never reached: ${missed.map((e) => `README line ${e.line} (// => ${e.expected})`).join(", ")}`;
  return undefined;
}

const readme = readFileSync(join(root, "README.md"), "utf8");
const blocks = extractBlocks(readme);
let dir: string;

beforeAll(() => {
  if (!existsSync(join(root, "dist/index.js")))
    throw new Error("dist/ is missing: run `npm run build:ts` (npm test does)");
  dir = mkdtempSync(join(root, ".readme-examples-"));
});
afterAll(() => {
  if (dir) rmSync(dir, { recursive: true, force: true });
});

describe("README.md code examples", () => {
  it("has examples to run, each with expected values", () => {
    const runnable = blocks.filter((b) => !b.skip);
    expect(runnable.length).toBeGreaterThan(0);
    expect(runnable.some((b) => instrument(b).expectations.length > 0)).toBe(true);
  });

  for (const [index, block] of blocks.entries()) {
    const title = `block at README line ${block.line} (${block.lang})`;
    if (block.skip) {
      it(`${title} parses (not run: ${block.skip})`, () => {
        expect(syntaxErrors(block)).toEqual([]);
      });
      continue;
    }
    it(`${title} runs and prints what its // => comments say`, async () => {
      expect(await failureOf(dir, `block-${index}`, block)).toBeUndefined();
    }, 70_000);
  }
});

/**
 * The compiler options `tsc --init` writes (TypeScript 5.9), `strict` among them: a user's fresh
 * project. `types: []` means no @types/node: the examples and the published declarations must
 * type-check without it.
 */
const TSC_INIT_OPTIONS: ts.CompilerOptions = {
  module: ts.ModuleKind.NodeNext,
  moduleResolution: ts.ModuleResolutionKind.NodeNext,
  target: ts.ScriptTarget.ESNext,
  types: [],
  noUncheckedIndexedAccess: true,
  exactOptionalPropertyTypes: true,
  strict: true,
  verbatimModuleSyntax: true,
  isolatedModules: true,
  noUncheckedSideEffectImports: true,
  moduleDetection: ts.ModuleDetectionKind.Force,
  skipLibCheck: true,
  noEmit: true,
};

/**
 * What the README's fragments (blocks marked `readme-test: skip`) take from the surrounding app:
 * the agent's model and tools, and imports shown in an earlier block.
 */
const FRAGMENT_CONTEXT = `
declare const createAgent: typeof import("langchain").createAgent;
// langchain 1.5 types this middleware's config as \`never\` under exactOptionalPropertyTypes (tsc --init's default).
declare const humanInTheLoopMiddleware: (config: { interruptOn: import("quickjs-native/langchain").InterruptOnTools }) => ReturnType<typeof import("langchain").humanInTheLoopMiddleware>;
declare const HumanMessage: typeof import("@langchain/core/messages").HumanMessage;
declare const createCodeInterpreterMiddleware: typeof import("quickjs-native/langchain").createCodeInterpreterMiddleware;
declare const model: string;
declare const lookup: import("@langchain/core/tools").StructuredToolInterface;
declare const sendEmail: import("@langchain/core/tools").StructuredToolInterface;
declare const deleteFile: import("@langchain/core/tools").StructuredToolInterface;
declare const tools: import("@langchain/core/tools").StructuredToolInterface[];
declare const process: { env: Record<string, string | undefined>; on(signal: "SIGTERM", listener: () => void): void; exit(code: number): never };
declare const interpreter: ReturnType<typeof import("quickjs-native/langchain").createCodeInterpreterMiddleware>;
declare const server: { close(): void };
declare const payments: { charge(order: { amount: number }, options: { idempotencyKey?: string | undefined }): Promise<string> };
`;

/** Type errors of `files` (paths in `dir`) under {@link TSC_INIT_OPTIONS} and `extra`, in the files `inFile` accepts. */
function typeErrors(files: string[], inFile: (path: string) => boolean, extra: ts.CompilerOptions = {}): string[] {
  const program = ts.createProgram(files, { ...TSC_INIT_OPTIONS, ...extra });
  return ts
    .getPreEmitDiagnostics(program)
    .filter((d) => d.file === undefined || inFile(d.file.fileName))
    .map((d) => {
      const where =
        d.file && d.start !== undefined
          ? `${d.file.fileName}:${d.file.getLineAndCharacterOfPosition(d.start).line + 1}: `
          : "";
      return `${where}${ts.flattenDiagnosticMessageText(d.messageText, "\n")}`;
    });
}

describe("README.md TypeScript examples type-check in a strict project (tsc --init)", () => {
  const tsBlocks = blocks.filter((b) => b.lang === "ts");

  it("has TypeScript examples, the Sandbox quick start among them", () => {
    expect(tsBlocks.some((b) => !b.skip && b.code.includes("defineFunction"))).toBe(true);
  });

  for (const [index, block] of tsBlocks.entries()) {
    it(`block at README line ${block.line} type-checks`, () => {
      const file = join(dir, `typed-${index}.ts`);
      writeFileSync(file, block.code);
      const files = [file];
      if (block.skip) {
        const context = join(dir, `typed-${index}-context.d.ts`);
        writeFileSync(context, FRAGMENT_CONTEXT);
        files.push(context);
      }
      const errors = typeErrors(files, (path) => path === file).map((e) =>
        e.replace(/^[^:]*typed-\d+\.ts:(\d+)/, (_m, l: string) => `README line ${block.line + Number(l) - 1}`),
      );
      expect(errors).toEqual([]);
    }, 120_000);
  }

  it("the published declarations of every entry point need no @types/node", () => {
    const file = join(dir, "entry-points.ts");
    const entries = Object.keys(
      (JSON.parse(readFileSync(join(root, "package.json"), "utf8")) as { exports: Record<string, unknown> }).exports,
    ).filter((e) => e !== "./package.json");
    writeFileSync(
      file,
      entries.map((e, i) => `export * as e${i} from "${e.replace(/^\./, "quickjs-native")}";`).join("\n"),
    );
    const ours = join(root, "dist");
    expect(typeErrors([file], (path) => path === file || path.startsWith(ours), { skipLibCheck: false })).toEqual([]);
  }, 120_000);
});

describe("the README examples check itself", () => {
  const sample = blocks.find((b) => !b.skip && instrument(b).expectations.length > 0);

  it("fails when an expected value is changed", async () => {
    expect(sample).toBeDefined();
    const first = instrument(sample!).expectations[0]!;
    const lines = sample!.code.split("\n");
    const l = first.line - sample!.line;
    lines[l] = lines[l]!.replace(/\/\/ =>.*$/, "// => 'a value the code does not produce'");
    const failure = await failureOf(dir, "mutated-expected", { ...sample!, code: lines.join("\n") });
    expect(failure).toContain(`README line ${first.line}: expected 'a value the code does not produce'`);
  }, 70_000);

  it("fails when the code is changed and the comment is not", async () => {
    const failure = await failureOf(dir, "mutated-code", {
      lang: "js",
      line: 1,
      code: "const n = [1, 2, 3].length + 1;\nn // => 3",
    });
    expect(failure).toContain("README line 2: expected 3");
  }, 70_000);

  it("fails on a // => that cannot be checked or is never reached", async () => {
    expect(await failureOf(dir, "unattached", { lang: "js", line: 1, code: "if (true) {\n}\n// => 1" })).toContain(
      "README line 3: `// =>` must follow",
    );
    expect(
      await failureOf(dir, "unreached", { lang: "js", line: 1, code: "function f() {\n  1 + 1; // => 2\n}" }),
    ).toContain("never reached: README line 2");
  }, 70_000);

  it("fails when a block throws", async () => {
    const failure = await failureOf(dir, "throws", {
      lang: "ts",
      line: 1,
      code: 'import { Sandbox } from "quickjs-native";\nconst s: Sandbox = new Sandbox();\ns.evalSync("throw new Error(\'nope\')");',
    });
    expect(failure).toMatch(/exit code 1[\s\S]*nope/);
  }, 70_000);
});
