import { describe, expect, it } from "vitest";
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import { resolveOptions } from "../../src/langchain/options.js";

const webSearch = tool(async ({ query }: { query: string }) => query, {
  name: "web_search",
  description: "search",
  schema: z.object({ query: z.string() }),
});

describe("middleware options", () => {
  it("fills in the documented defaults", () => {
    const r = resolveOptions({});
    expect(r.memoryLimitBytes).toBe(64 * 1024 * 1024);
    expect(r.executionTimeoutMs).toBe(5000);
    expect(r.toolName).toBe("eval");
    expect(r.captureConsole).toBe(true);
    expect(r.maxResultChars).toBe(4000);
    expect(r.maxPtcCalls).toBe(256);
    expect(r.subagents).toBe(true);
    expect(r.mode).toBe("thread");
    expect(r.maxSnapshotBytes).toBe(r.memoryLimitBytes);
    expect(r.systemPrompt).toEqual({ kind: "default" });
    expect(r.ptc).toEqual({ safe: false, all: false, names: [], instances: [] });
    expect(r.maxLiveSessions).toBe(64);
    expect(r.sessionIdleTimeoutMs).toBe(30 * 60 * 1000);
    expect(r.copyLimitBytes).toBe(r.memoryLimitBytes);
    expect(r.wallTimeoutMs).toBe(60_000);
    expect(r.clock).toBe("frozen");
    expect(r.randomSeed).toBeUndefined();
  });

  it("wallTimeoutMs follows a larger executionTimeoutMs, copyLimitBytes a custom memoryLimitBytes", () => {
    expect(resolveOptions({ executionTimeoutMs: 90_000 }).wallTimeoutMs).toBe(90_000);
    expect(resolveOptions({ memoryLimitBytes: 8 * 1024 * 1024 }).copyLimitBytes).toBe(8 * 1024 * 1024);
  });

  it("maxSnapshotBytes follows a custom memoryLimitBytes", () => {
    expect(resolveOptions({ memoryLimitBytes: 8 * 1024 * 1024 }).maxSnapshotBytes).toBe(8 * 1024 * 1024);
  });

  it.each([
    [{ memoryLimitBytes: 1.5 }, /memoryLimitBytes must be an integer/],
    [{ memoryLimitBytes: 1024 }, /memoryLimitBytes must be an integer between 1048576 and 17179869184, got 1024/],
    [{ maxStackSizeBytes: 1024 }, /maxStackSizeBytes must be an integer between 65536 and 8388608/],
    [{ executionTimeoutMs: 2 ** 31 }, /executionTimeoutMs must be an integer between 1 and 2147483647/],
    [{ executionTimeoutMs: 0 }, /executionTimeoutMs/],
    [{ executionTimeoutMs: "5s" }, /executionTimeoutMs must be an integer between 1 and 2147483647, got "5s"/],
    [{ executionTimeoutMs: 5000, wallTimeoutMs: 100 }, /wallTimeoutMs \(100\) must be >= executionTimeoutMs \(5000\)/],
    [{ maxPtcCalls: 0 }, /maxPtcCalls/],
    [{ maxResultChars: 10 }, /maxResultChars/],
    [{ captureConsole: "yes" }, /captureConsole must be true or false/],
    [{ mode: "session" }, /mode must be "thread", "turn" or "call"/],
    [{ toolName: "my tool" }, /toolName must be/],
    [{ toolName: "task" }, /toolName cannot be "task"/],
    [{ systemPrompt: "" }, /systemPrompt must not be empty/],
    [{ systemPrompt: 3 }, /systemPrompt must be a string/],
    [{ systemPrompt: { prepend: "x" } }, /systemPrompt must be a string/],
    [{ ptcQuotas: { web_search: -1 } }, /ptcQuotas.web_search/],
    [{ ptcQuotas: [1] }, /ptcQuotas must be an object/],
    [{ snapshotSigningKey: "short" }, /snapshotSigningKey must be at least 16 bytes, got 5/],
    [{ snapshotSigningKey: 42 }, /snapshotSigningKey must be a string or a Uint8Array/],
    [{ maxLiveSessions: 0 }, /maxLiveSessions/],
    [{ memoryLimit: 1 }, /unknown option "memoryLimit"/],
    [{ clock: "utc" }, /clock must be "frozen", "real" or an object with a now\(\) method/],
    [{ randomSeed: -1 }, /randomSeed/],
  ])("refuses %j at construction", (options, message) => {
    expect(() => resolveOptions(options as never)).toThrow(message);
  });

  it("an unknown option is named, with the list of known options taken from the schema", () => {
    expect(() => resolveOptions({ memoryLimit: 1 } as never)).toThrow(
      /^createCodeInterpreterMiddleware: unknown option "memoryLimit"; known options: memoryLimitBytes, copyLimitBytes, .*, interruptOn, maxLiveSessions, sessionIdleTimeoutMs$/,
    );
  });

  it.each([
    [{ maxResultChars: 10 }, "maxResultChars must be an integer >= 300, got 10"],
    [{ maxCodeBytes: 64 * 1024 * 1024 + 1 }, "maxCodeBytes must be an integer between 1024 and 67108864, got 67108865"],
    [{ copyLimitBytes: 1 }, "copyLimitBytes must be an integer between 1024 and 17179869184, got 1"],
    [{ wallTimeoutMs: 0 }, "wallTimeoutMs must be an integer between 1 and 2147483647, got 0"],
    [{ subagentTimeoutMs: 1.5 }, "subagentTimeoutMs must be an integer between 1 and 2147483647, got 1.5"],
    [{ maxSnapshotBytes: 10 }, "maxSnapshotBytes must be an integer >= 1024, got 10"],
    [{ sessionIdleTimeoutMs: 999 }, "sessionIdleTimeoutMs must be an integer >= 1000, got 999"],
    [{ maxKeptOutputChars: -1 }, "maxKeptOutputChars must be an integer >= 0, got -1"],
    [{ maxPtcCalls: "many" }, 'maxPtcCalls must be an integer >= 1, got "many"'],
    [{ ptcQuotas: { web_search: -1 } }, "ptcQuotas.web_search must be an integer >= 0, got -1"],
    [{ randomSeed: Number.NaN }, "randomSeed must be an integer >= 0, got NaN"],
    [{ onUsage: 3 }, "onUsage must be a function, got 3"],
    [{ usageTenant: "tenant" }, 'usageTenant must be a function, got "tenant"'],
    [{ ptcAcknowledgeUnsafe: 1 }, "ptcAcknowledgeUnsafe must be true or false, got 1"],
    [{ mode: null }, 'mode must be "thread", "turn" or "call", got null'],
    [{ toolName: 5 }, 'toolName must be 1-64 letters, digits, "_" or "-", got 5'],
  ])("an out-of-range or mistyped %j names the option and what it accepts", (options, message) => {
    expect(() => resolveOptions(options as never)).toThrow(`createCodeInterpreterMiddleware: ${message}`);
  });

  it("an option given as undefined takes its default", () => {
    const r = resolveOptions({ memoryLimitBytes: undefined, mode: undefined, maxPtcCalls: undefined } as never);
    expect([r.memoryLimitBytes, r.mode, r.maxPtcCalls]).toEqual([64 * 1024 * 1024, "thread", 256]);
  });

  it("errors are TypeErrors naming the factory", () => {
    expect(() => resolveOptions({ mode: "x" as never })).toThrow(TypeError);
    expect(() => resolveOptions({ mode: "x" as never })).toThrow(/^createCodeInterpreterMiddleware: /);
  });

  it("maxPtcCalls null means unlimited", () => {
    expect(resolveOptions({ maxPtcCalls: null }).maxPtcCalls).toBeNull();
  });

  it("systemPrompt: string replaces, { append } extends, false turns off, null is the default", () => {
    expect(resolveOptions({ systemPrompt: "Be brief." }).systemPrompt).toEqual({ kind: "replace", text: "Be brief." });
    expect(resolveOptions({ systemPrompt: { append: "Also X." } }).systemPrompt).toEqual({
      kind: "append",
      text: "Also X.",
    });
    expect(resolveOptions({ systemPrompt: false }).systemPrompt).toEqual({ kind: "off" });
    expect(resolveOptions({ systemPrompt: null }).systemPrompt).toEqual({ kind: "default" });
  });

  it("ptc accepts presets, names and tool instances, mixed", () => {
    const r = resolveOptions({ ptc: ["safe", "web_search", webSearch] });
    expect(r.ptc.safe).toBe(true);
    expect(r.ptc.all).toBe(false);
    expect(r.ptc.names).toEqual(["web_search"]);
    expect(r.ptc.instances).toEqual([webSearch]);
    expect(resolveOptions({ ptc: "safe" }).ptc.safe).toBe(true);
  });

  it('ptc "all" requires ptcAcknowledgeUnsafe', () => {
    expect(() => resolveOptions({ ptc: "all" })).toThrow(/ptcAcknowledgeUnsafe: true/);
    expect(() => resolveOptions({ ptc: ["safe", "all"] })).toThrow(/ptcAcknowledgeUnsafe/);
    expect(resolveOptions({ ptc: "all", ptcAcknowledgeUnsafe: true }).ptc.all).toBe(true);
  });

  it("ptc refuses the task tool and the eval tool itself, by name or instance", () => {
    expect(() => resolveOptions({ ptc: ["task"] })).toThrow(/cannot expose "task"/);
    const task = tool(async () => "", { name: "task", description: "", schema: z.object({}) });
    expect(() => resolveOptions({ ptc: [task] })).toThrow(/cannot expose "task"/);
    expect(() => resolveOptions({ ptc: ["eval"] })).toThrow(/own tool "eval"/);
    expect(() => resolveOptions({ toolName: "js", ptc: ["js"] })).toThrow(/own tool "js"/);
    expect(() => resolveOptions({ toolName: "js", ptc: ["eval"] })).not.toThrow();
  });

  it("ptc refuses names that collide once camel-cased", () => {
    expect(() => resolveOptions({ ptc: ["web_search", "web-search"] })).toThrow(
      /"web_search" and "web-search" would both be tools\.webSearch/,
    );
  });

  it("ptc refuses entries that are neither presets, names nor tools", () => {
    expect(() => resolveOptions({ ptc: [42 as never] })).toThrow(/ptc entries must be/);
    expect(() => resolveOptions({ ptc: [{ name: "x" } as never] })).toThrow(/ptc entries must be/);
    expect(() => resolveOptions({ ptc: ["bad name!"] })).toThrow(/not a valid tool name/);
    expect(() => resolveOptions({ ptc: "web_search" as never })).toThrow(/ptc must be "safe", "all" or a list/);
  });

  it("snapshotSigningKey is copied, so later mutation of the caller's buffer cannot change it", () => {
    const key = new Uint8Array(32).fill(7);
    const r = resolveOptions({ snapshotSigningKey: key });
    key.fill(0);
    expect(r.snapshotSigningKey?.[0]).toBe(7);
  });

  it("interruptOn: true allows every decision, false leaves the tool out, a config keeps its decisions", () => {
    const r = resolveOptions({
      interruptOn: {
        send_email: true,
        read_file: false,
        delete_file: { allowedDecisions: ["approve", "reject"], description: "Deletes" },
      },
    });
    expect([...r.interruptOn.tools.keys()]).toEqual(["send_email", "delete_file"]);
    expect(r.interruptOn.tools.get("send_email")?.allowedDecisions).toEqual(["approve", "edit", "reject"]);
    expect(r.interruptOn.tools.get("delete_file")).toMatchObject({
      allowedDecisions: ["approve", "reject"],
      description: "Deletes",
    });
    expect(r.interruptOn.descriptionPrefix).toBe("Tool execution requires approval");
  });

  it("interruptOn accepts a whole humanInTheLoopMiddleware configuration", () => {
    const r = resolveOptions({ interruptOn: { interruptOn: { send_email: true }, descriptionPrefix: "Check this" } });
    expect([...r.interruptOn.tools.keys()]).toEqual(["send_email"]);
    expect(r.interruptOn.descriptionPrefix).toBe("Check this");
  });

  it.each([
    [{ interruptOn: "send_email" }, /interruptOn must be an object/],
    [{ interruptOn: { send_email: "yes" } }, /interruptOn\.send_email must be true, false or \{ allowedDecisions/],
    [
      { interruptOn: { send_email: { allowedDecisions: [] } } },
      /interruptOn\.send_email\.allowedDecisions must be a non-empty list of "approve", "edit", "reject"/,
    ],
    [
      { interruptOn: { send_email: { allowedDecisions: ["approve", "maybe"] } } },
      /allowedDecisions must be a non-empty list/,
    ],
    [
      { interruptOn: { send_email: { allowedDecisions: ["approve"], descripton: "typo" } } },
      /interruptOn\.send_email: unknown key "descripton"; valid keys: allowedDecisions, description, argsSchema, when/,
    ],
    [
      { interruptOn: { send_email: { allowedDecisions: ["approve"], when: true } } },
      /interruptOn\.send_email\.when must be a function/,
    ],
    [
      { interruptOn: { interruptOn: { send_email: true }, descriptionPrefix: 3 } },
      /interruptOn\.descriptionPrefix must be a string/,
    ],
    [
      { interruptOn: { eval: true } },
      /interruptOn\.eval: the interpreter's own tool is reviewed by humanInTheLoopMiddleware/,
    ],
  ])("interruptOn mistakes fail at construction: %j", (options, message) => {
    expect(() => resolveOptions(options as never)).toThrow(message);
  });
});
