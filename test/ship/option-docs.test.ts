/**
 * The middleware's options, as a user's editor shows them from the built declarations (dist/,
 * `npm run build:ts`): the type reads as a plain object type and each field keeps its TSDoc.
 * `z.input` of the options schema would print its fields without their comments in the emitted
 * .d.ts; the public type is a mapped type over the documented shape so that they stay.
 */
import { existsSync, mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { afterAll, beforeAll, describe, expect, it } from "vitest";

const root = fileURLToPath(new URL("../..", import.meta.url));
const entry = join(root, "dist", "langchain", "index.d.ts");
const dir = mkdtempSync(join(tmpdir(), "option-docs-"));
const file = join(dir, "use.ts");
const FIELDS = ["memoryLimitBytes", "ptc", "interruptOn", "clock", "mode", "onUsage"] as const;
const source = `import type { CodeInterpreterMiddlewareOptions } from ${JSON.stringify(entry.replace(/\.d\.ts$/, ".js"))};
declare const o: CodeInterpreterMiddlewareOptions;
${FIELDS.map((f) => `o.${f};`).join("\n")}
`;

let service: ts.LanguageService;

beforeAll(() => {
  if (!existsSync(entry)) throw new Error("dist/ is missing: run `npm run build:ts` (npm test does)");
  writeFileSync(file, source);
  const options: ts.CompilerOptions = {
    module: ts.ModuleKind.NodeNext,
    moduleResolution: ts.ModuleResolutionKind.NodeNext,
    strict: true,
    exactOptionalPropertyTypes: true,
    target: ts.ScriptTarget.ES2022,
    noEmit: true,
    skipLibCheck: true,
  };
  service = ts.createLanguageService({
    getScriptFileNames: () => [file],
    getScriptVersion: () => "1",
    getScriptSnapshot: (name) =>
      ts.sys.fileExists(name) ? ts.ScriptSnapshot.fromString(ts.sys.readFile(name) ?? "") : undefined,
    getCurrentDirectory: () => root,
    getCompilationSettings: () => options,
    getDefaultLibFileName: (o) => ts.getDefaultLibFilePath(o),
    fileExists: ts.sys.fileExists,
    readFile: ts.sys.readFile,
    readDirectory: ts.sys.readDirectory,
    directoryExists: ts.sys.directoryExists,
    getDirectories: ts.sys.getDirectories,
  });
});

afterAll(() => rmSync(dir, { recursive: true, force: true }));

function hover(at: string): { type: string; doc: string } {
  const info = service.getQuickInfoAtPosition(file, source.indexOf(at));
  return { type: ts.displayPartsToString(info?.displayParts), doc: ts.displayPartsToString(info?.documentation) };
}

describe("CodeInterpreterMiddlewareOptions in the built declarations", () => {
  // Type-checking against langchain's declarations takes seconds, more on a loaded machine.
  it("compiles in a strict consumer", { timeout: 180_000 }, () => {
    expect(
      service.getSemanticDiagnostics(file).map((d) => ts.flattenDiagnosticMessageText(d.messageText, "\n")),
    ).toEqual([]);
  });

  it("shows a plain object type, without zod's types", () => {
    const { type } = hover("CodeInterpreterMiddlewareOptions;");
    expect(type).toMatch(/memoryLimitBytes\?: number \| undefined;/);
    expect(type).not.toMatch(/Zod|any\b/);
  });

  it.each(FIELDS)("keeps the TSDoc of %s", (field) => {
    const { type, doc } = hover(`${field};`);
    expect(type).not.toMatch(/Zod|\bany\b/);
    expect(doc.length).toBeGreaterThan(40);
  });

  it("keeps the default beside the field", () => {
    expect(hover("memoryLimitBytes;").doc).toMatch(/Default 64 MiB/);
  });
});
