import { existsSync, mkdirSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";
import ts from "typescript";
import { describe, expect, it } from "vitest";
import {
  camelCaseToolName,
  EVAL_INPUT_DESCRIPTIONS,
  renderSystemPrompt,
  renderToolDescription,
  renderToolSignatures,
  type PromptInput,
  type PromptMode,
  type PtcToolInfo,
} from "../../src/langchain/prompts.js";

const GOLDEN_DIR = join(dirname(fileURLToPath(import.meta.url)), "golden");
const UPDATE = process.env["UPDATE_GOLDEN"] === "1";

/** Compares with test/langchain/golden/<name>; `UPDATE_GOLDEN=1` rewrites the file instead. */
function expectGolden(name: string, actual: string): void {
  const path = join(GOLDEN_DIR, name);
  if (UPDATE) {
    mkdirSync(GOLDEN_DIR, { recursive: true });
    writeFileSync(path, `${actual}\n`);
    return;
  }
  if (!existsSync(path))
    throw new Error(`missing golden file ${name}: run UPDATE_GOLDEN=1 npx vitest run test/langchain/prompts.test.ts`);
  expect(`${actual}\n`).toBe(readFileSync(path, "utf8"));
}

const webSearch: PtcToolInfo = {
  name: "web_search",
  camelName: "webSearch",
  description: "Search the web and return the best hits.",
  schema: {
    type: "object",
    properties: {
      query: { type: "string", description: "What to search for." },
      max_results: { type: "integer", minimum: 1, maximum: 20, default: 5 },
      recency: { enum: ["day", "week", "any"], description: "How recent the hits must be." },
    },
    required: ["query"],
  },
};

const readFile: PtcToolInfo = {
  name: "read_file",
  camelName: "readFile",
  description: "Read a file from the agent's file system.",
  schema: {
    type: "object",
    properties: {
      file_path: { type: "string", description: "Absolute path." },
      offset: { type: "number" },
      limit: { type: "number" },
    },
    required: ["file_path"],
  },
  quota: 20,
};

function input(mode: PromptMode, options: { ptc?: boolean; task?: boolean } = {}): PromptInput {
  return {
    mode,
    toolName: "eval",
    limits: {
      memoryLimitBytes: 64 * 1024 * 1024,
      executionTimeoutMs: 5000,
      wallTimeoutMs: 60_000,
      maxResultChars: 4000,
      maxPtcCalls: 256,
    },
    captureConsole: true,
    ptcTools: options.ptc ? [webSearch, readFile] : [],
    taskAvailable: options.task ?? false,
    clock: "real",
    randomSeeded: false,
    subagents: options.task
      ? [
          { name: "researcher", description: "Researches one question in depth." },
          { name: "reviewer", description: "Reviews one file." },
        ]
      : [],
    ...(options.task ? { subagentTimeoutMs: 600_000 } : {}),
  };
}

const MODES: PromptMode[] = ["thread", "turn", "call"];

describe("system prompt golden files", () => {
  for (const mode of MODES) {
    it(`mode ${mode}, PTC off`, () => expectGolden(`prompt-${mode}.md`, renderSystemPrompt(input(mode))));
    it(`mode ${mode}, PTC on`, () =>
      expectGolden(`prompt-${mode}-ptc.md`, renderSystemPrompt(input(mode, { ptc: true }))));
    it(`mode ${mode}, PTC and task on`, () =>
      expectGolden(`prompt-${mode}-ptc-task.md`, renderSystemPrompt(input(mode, { ptc: true, task: true }))));
    it(`tool description, mode ${mode}`, () =>
      expectGolden(`tool-description-${mode}.txt`, renderToolDescription(input(mode, { ptc: true, task: true }))));
  }
});

describe("system prompt golden files: reviewed calls (interruptOn)", () => {
  it("mode thread, PTC and task on, one tool and task() reviewed", () => {
    const base = input("thread", { ptc: true, task: true });
    const reviewed = {
      ...base,
      ptcTools: base.ptcTools.map((t) => (t.name === "web_search" ? { ...t, reviewed: true } : t)),
      taskReviewed: true,
    };
    expectGolden("prompt-thread-ptc-task-reviewed.md", renderSystemPrompt(reviewed));
  });

  it("without reviewed tools the prompt says calls from code skip approval; with one it explains the replay", () => {
    const base = input("thread", { ptc: true });
    expect(renderSystemPrompt(base)).toContain("skip any human approval");
    const reviewed = renderSystemPrompt({ ...base, ptcTools: base.ptcTools.map((t) => ({ ...t, reviewed: true })) });
    expect(reviewed).not.toContain("skip any human approval");
    expect(reviewed).toContain("`tools.webSearch`, `tools.readFile` wait for a human");
    expect(reviewed).toContain("ReplayDivergenceError");
    expect(reviewed).toContain("`Date` does not");
    expect(
      renderSystemPrompt({ ...base, clock: "frozen", ptcTools: base.ptcTools.map((t) => ({ ...t, reviewed: true })) }),
    ).toContain("`Date` and `Math.random()` (both repeat exactly)");
  });

  it("task() reviewed without PTC states the rule in the task section", () => {
    const prompt = renderSystemPrompt({ ...input("thread", { task: true }), taskReviewed: true });
    expect(prompt).toContain("- **Reviewed calls**: `task()` waits for a human");
  });
});

describe("system prompt: every claim follows the options", () => {
  it("separates sections with one blank line", () => {
    const prompt = renderSystemPrompt(input("thread", { ptc: true, task: true }));
    const headings = prompt.split("\n").filter((line) => line.startsWith("## "));
    expect(headings).toHaveLength(3);
    for (const heading of headings.slice(1)) expect(prompt).toContain(`\n\n${heading}\n\n`);
    expect(prompt).not.toMatch(/\n{3,}/);
    expect(prompt).not.toMatch(/\S\n## /);
  });

  it("states the limits it was given", () => {
    const prompt = renderSystemPrompt({
      ...input("thread", { ptc: true }),
      limits: {
        memoryLimitBytes: 16 * 1024 * 1024,
        executionTimeoutMs: 1500,
        wallTimeoutMs: 30_000,
        maxResultChars: 12_345,
        maxPtcCalls: 7,
      },
    });
    expect(prompt).toContain("16 MiB of memory");
    expect(prompt).toContain("1.5 s of execution time");
    expect(prompt).toContain("30 s in total");
    expect(prompt).toContain("12,345 characters");
    expect(prompt).toContain("At most 7 `tools` calls per program");
    expect(prompt).toContain("`tools.readFile` 20 calls");
  });

  it("says there is no call limit when maxPtcCalls is null", () => {
    const prompt = renderSystemPrompt({
      ...input("thread", { ptc: true }),
      limits: { ...input("thread").limits, maxPtcCalls: null },
    });
    expect(prompt).toContain("no limit on the number of `tools` calls");
    expect(prompt).not.toContain("PTCCallBudgetExceededError");
  });

  it("tells what persists in each mode", () => {
    expect(renderSystemPrompt(input("thread"))).toContain("also in later turns");
    expect(renderSystemPrompt(input("turn"))).toContain("the next turn starts with a fresh interpreter");
    const call = renderSystemPrompt(input("call", { task: true }));
    expect(call).toContain("nothing persists between calls");
    expect(call).not.toContain("persist across calls");
    expect(call).not.toContain("Reuse variables");
    expect(call).not.toContain("reset: true");
  });

  it("does not promise console output when console capture is off", () => {
    const prompt = renderSystemPrompt({ ...input("thread"), captureConsole: false });
    expect(prompt).toContain("output is discarded");
    expect(prompt).not.toContain("lines are shown first");
  });

  it("states the clock and randomness in force", () => {
    expect(renderSystemPrompt(input("thread"))).toContain("`Date` reads the real clock.");
    expect(renderSystemPrompt({ ...input("thread"), clock: "frozen" })).toContain(
      "The clock is frozen during each call",
    );
    expect(renderSystemPrompt({ ...input("thread"), clock: "host" })).toContain("supplied by the application");
    expect(renderSystemPrompt({ ...input("thread"), randomSeeded: true })).toContain("`Math.random()` is seeded");
  });

  it("documents the tools API, its rules and the interruptOn bypass only when PTC is on", () => {
    const off = renderSystemPrompt(input("thread"));
    expect(off).not.toContain("tools.");
    expect(off).not.toContain("interruptOn");
    const on = renderSystemPrompt(input("thread", { ptc: true }));
    expect(on).toContain("webSearch(input: {");
    expect(on).toContain("always `await` it");
    expect(on).toContain("Promise.all");
    expect(on).toContain("Chain dependent calls inside one program");
    expect(on).toContain("end with an expression holding the final value");
    expect(on).toContain("interruptOn");
  });

  it("adds the task section only when task is available", () => {
    expect(renderSystemPrompt(input("thread", { ptc: true }))).not.toContain("task(");
    const prompt = renderSystemPrompt(input("thread", { task: true }));
    for (const rule of [
      "Explore first",
      "Locators, not payloads",
      "Always set `responseSchema`",
      "Batches of about 10",
      "Return the last expression",
      "Reuse variables",
      "workflow",
      "interruptOn",
    ]) {
      expect(prompt).toContain(rule);
    }
    expect(prompt).toContain("`researcher`: Researches one question in depth.");
    expect(prompt).toContain('subagentType: "researcher"');
  });

  it("names the configured tool", () => {
    const prompt = renderSystemPrompt({ ...input("thread", { ptc: true }), toolName: "run_js" });
    expect(prompt).toContain("`run_js`");
    expect(prompt).not.toContain("`eval`");
  });

  it("describes the eval input fields", () => {
    expect(EVAL_INPUT_DESCRIPTIONS.code).toContain("last expression");
    expect(EVAL_INPUT_DESCRIPTIONS.reset).toContain("fresh interpreter");
  });
});

/** Parses a rendered signature as TypeScript; returns the syntax errors. */
function syntaxErrors(source: string): string[] {
  const output = ts.transpileModule(source, { reportDiagnostics: true, fileName: "signatures.ts" });
  return (output.diagnostics ?? []).map((d) => ts.flattenDiagnosticMessageText(d.messageText, " "));
}

function signatureOf(schema: PtcToolInfo["schema"], description = "A tool."): string {
  return renderToolSignatures([{ name: "t", camelName: "t", description, schema }]);
}

describe("renderToolSignatures", () => {
  it("renders nested objects, arrays, enums, unions and optional fields as valid TypeScript", () => {
    const rendered = signatureOf({
      type: "object",
      properties: {
        id: { type: "string", description: "Row id." },
        tags: { type: "array", items: { type: "string" } },
        mode: { enum: ["fast", "slow", 3, null] },
        target: {
          anyOf: [{ type: "string" }, { type: "object", properties: { x: { type: "number" } }, required: ["x"] }],
        },
        choice: { oneOf: [{ const: "a" }, { const: "b" }] },
        both: {
          allOf: [
            { type: "object", properties: { a: { type: "string" } } },
            { type: "object", properties: { b: { type: "string" } } },
          ],
        },
        maybe: { type: ["string", "null"] },
        pair: { type: "array", prefixItems: [{ type: "string" }, { type: "number" }] },
        nested: {
          type: "object",
          properties: { deeper: { type: "object", properties: { leaf: { type: "boolean" } }, required: ["leaf"] } },
        },
        counts: { type: "object", additionalProperties: { type: "integer" } },
        "odd-key": { type: "string" },
      },
      required: ["id", "nested"],
    });
    expect(syntaxErrors(rendered)).toEqual([]);
    expect(rendered).toContain("    /** Row id. */\n    id: string;");
    expect(rendered).toContain("tags?: string[];");
    expect(rendered).toContain('mode?: "fast" | "slow" | 3 | null;');
    expect(rendered).toContain("target?: string | {\n      x: number;\n    };");
    expect(rendered).toContain('choice?: "a" | "b";');
    expect(rendered).toContain("both?: {\n      a?: string;\n    } & {\n      b?: string;\n    };");
    expect(rendered).toContain("maybe?: string | null;");
    expect(rendered).toContain("pair?: [string, number];");
    expect(rendered).toContain("nested: {\n      deeper?: {\n        leaf: boolean;\n      };\n    };");
    expect(rendered).toContain("counts?: Record<string, number>;");
    expect(rendered).toContain('"odd-key"?: string;');
  });

  it("keeps a description containing */ inside its doc comment", () => {
    const rendered = signatureOf(
      { type: "object", properties: { glob: { type: "string", description: "Like src/**/*.ts" } } },
      "Ends */ here",
    );
    expect(syntaxErrors(rendered)).toEqual([]);
    expect(rendered).toContain("Like src/**\\/*.ts");
  });

  it("stops at recursive $refs", () => {
    const rendered = signatureOf({
      type: "object",
      properties: { tree: { $ref: "#/$defs/Node" } },
      $defs: {
        Node: {
          type: "object",
          properties: { value: { type: "number" }, children: { type: "array", items: { $ref: "#/$defs/Node" } } },
        },
      },
    });
    expect(syntaxErrors(rendered)).toEqual([]);
    expect(rendered).toContain("children?: unknown[];");
  });

  it("makes the input optional when nothing is required", () => {
    expect(signatureOf({ type: "object", properties: { path: { type: "string" } } })).toContain("t(input?: {");
    expect(signatureOf({ type: "object", properties: { path: { type: "string" } }, required: ["path"] })).toContain(
      "t(input: {",
    );
  });

  it("shows constraints and defaults in the doc comment", () => {
    const rendered = signatureOf({
      type: "object",
      properties: { n: { type: "integer", description: "How many.", minimum: 1, maximum: 50, default: 10 } },
    });
    expect(rendered).toContain("     * How many.\n     * minimum: 1, maximum: 50\n     * @default 10\n");
  });

  it("leaves out the ±(2^53 - 1) bounds zod gives every integer, keeping real ones", () => {
    const rendered = signatureOf({
      type: "object",
      properties: {
        n: { type: "integer", minimum: -9007199254740991, maximum: 9007199254740991 },
        k: { type: "integer", minimum: 0, maximum: 9007199254740991 },
      },
    });
    expect(rendered).not.toContain("9007199254740991");
    expect(rendered).toContain("    /** minimum: 0 */\n    k?: number;");
    expect(rendered).toContain("\n    n?: number;");
  });

  it("caps the depth of a pathological schema", () => {
    let schema: PtcToolInfo["schema"] = { type: "string" };
    for (let i = 0; i < 500; i++) schema = { type: "object", properties: { x: schema } };
    const rendered = signatureOf(schema);
    expect(syntaxErrors(rendered)).toEqual([]);
    expect(rendered.length).toBeLessThan(5000);
  });
});

describe("camelCaseToolName", () => {
  it.each([
    ["web_search", "webSearch"],
    ["read-file", "readFile"],
    ["get.user.id", "getUserId"],
    ["WebSearch", "webSearch"],
    ["HTTPGet", "httpGet"],
    ["URL", "url"],
    ["mcp__server__list_items", "mcpServerListItems"],
    ["2fa_check", "_2faCheck"],
    ["ls", "ls"],
    ["---", "_"],
  ])("%s -> %s", (name, expected) => {
    expect(camelCaseToolName(name)).toBe(expected);
  });
});
