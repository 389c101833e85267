/**
 * Interpreter state in graph state: mode "thread" survives a new middleware instance sharing the
 * checkpointer (as a restarted process would), writes nothing when nothing changed, says what it
 * lost, and rolls a stopped eval back to the last good state. Modes "turn" and "call" keep nothing.
 */
import { describe, expect, it } from "vitest";
import { createAgent } from "langchain";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { MemorySaver } from "@langchain/langgraph";
import { tool } from "@langchain/core/tools";
import { z } from "zod";
import type { CodeInterpreterMiddleware } from "../../src/langchain/index.js";
import { Persistence, SNAPSHOT_STATE_KEY } from "../../src/langchain/persistence.js";
import { sandboxOptions } from "../../src/langchain/eval-tool.js";
import { resolveOptions } from "../../src/langchain/options.js";
import { Sandbox } from "../../src/sandbox.js";
import { ScriptedChatModel, callTool, contentText, reply, section, toolMessages } from "./support/agent.js";
import { trackedMiddleware } from "./support/tracked-middleware.js";

const middleware = trackedMiddleware;

let runs = 0;

/** One agent run on `threadId` whose model makes the given evals, one per model call. */
async function turn(
  interpreter: CodeInterpreterMiddleware,
  checkpointer: MemorySaver,
  threadId: string,
  codes: readonly (string | { code: string; reset: boolean })[],
) {
  // Fresh message ids per run: the scripted model's own ids restart at 1 and would replace history.
  const run = ++runs;
  const steps = [
    ...codes.map((code, i) => callTool("eval", typeof code === "string" ? { code } : code, `call-${run}-${i}`)),
    reply("done"),
  ];
  steps.forEach((step, i) => {
    step.id = `run-${run}-${i}`;
  });
  const model = new ScriptedChatModel(steps);
  const agent = createAgent({ model, tools: [], middleware: [interpreter], checkpointer });
  const config = { configurable: { thread_id: threadId } };
  const result = await agent.invoke({ messages: [new HumanMessage("go")] }, config);
  const all = toolMessages(result.messages as BaseMessage[]);
  const evals = all.slice(all.length - codes.length);
  const state = (await agent.getState(config)).values as Record<string, unknown>;
  return { evals, stored: state[SNAPSHOT_STATE_KEY] as { turn: number; data?: string; notice?: string } | undefined };
}

function notice(message: BaseMessage): string {
  return /<notice>\n?([\s\S]*?)\n?<\/notice>/.exec(contentText(message))?.[1] ?? "";
}

const TURN_ONE = `
const data = [{ name: "a", v: 3 }, { name: "b", v: 5 }, { name: "c", v: 8 }];
function score(r) { return r.v * 10; }
class Acc { constructor() { this.total = 0; } add(n) { this.total += n; return this.total; } }
const acc = new Acc();
acc.add(score(data[0]));
`;
const TURN_TWO = `[data.length, score(data[2]), acc.add(1), acc instanceof Acc]`;
const KEY = "0123456789abcdef-signing-key";

describe('mode "thread": state in graph state', () => {
  it("a second middleware instance on the same checkpointer continues the thread with data, functions and class instances", async () => {
    const saver = new MemorySaver();
    const first = await turn(middleware({ snapshotSigningKey: KEY }), saver, "t1", [TURN_ONE]);
    expect(section(first.evals[0]!, "result")).toBe("30");
    // No store: the snapshot's chunks are in the checkpointer, graph state holds their reference.
    expect(first.stored).toMatchObject({ ref: expect.any(String), at: "checkpointer" });
    const second = await turn(middleware({ snapshotSigningKey: KEY }), saver, "t1", [TURN_TWO]);
    expect(section(second.evals[0]!, "result")).toBe("[ 3, 80, 31, true ]");
    expect(notice(second.evals[0]!)).toBe("");
  });

  it("reset: true in a new process starts fresh instead of restoring the stored state", async () => {
    const saver = new MemorySaver();
    await turn(middleware(), saver, "t6", ["var old = 1"]);
    const second = await turn(middleware(), saver, "t6", [{ code: "typeof old", reset: true }, "typeof old"]);
    expect(section(second.evals[0]!, "result")).toBe("undefined");
    expect(section(second.evals[1]!, "result")).toBe("undefined");
  });

  it("a run that changes nothing writes no new snapshot (same turn, same bytes)", async () => {
    const saver = new MemorySaver();
    const m = middleware({ snapshotSigningKey: KEY });
    const first = await turn(m, saver, "t2", ["var kept = 1"]);
    const readOnly = await turn(m, saver, "t2", ["kept + 1"]);
    expect(readOnly.stored).toEqual(first.stored);
    const changed = await turn(m, saver, "t2", ["kept = 2"]);
    expect(changed.stored?.turn).toBe(first.stored!.turn + 1);
  });

  it("a snapshot signed with another key is refused: the interpreter starts fresh and the model is told why in one line", async () => {
    const saver = new MemorySaver();
    await turn(middleware({ snapshotSigningKey: KEY }), saver, "t3", ["const lost = 1"]);
    const second = await turn(middleware({ snapshotSigningKey: "another-key-of-16-bytes-or-more" }), saver, "t3", [
      "typeof lost",
    ]);
    expect(section(second.evals[0]!, "result")).toBe("undefined");
    expect(notice(second.evals[0]!)).toMatch(
      /^The saved interpreter state from earlier turns could not be restored \(INVALID_SNAPSHOT: .*\): the interpreter started fresh/,
    );
    expect(notice(second.evals[0]!).split("\n")).toHaveLength(1);
  });

  it("values that cannot be saved are named in the next eval output, and reading one gives the documented error", async () => {
    const saver = new MemorySaver();
    await turn(middleware(), saver, "t4", ["const counter = (() => { let n = 0; return () => ++n; })(); const ok = 5"]);
    const second = await turn(middleware(), saver, "t4", ["ok", "counter()"]);
    expect(notice(second.evals[0]!)).toMatch(/could not be saved and now throw when read: counter \(closure\)/);
    expect(section(second.evals[0]!, "result")).toBe("5");
    expect(section(second.evals[1]!, "error")).toMatch(
      /Value for 'counter' was not restored because it is not serializable \(type: closure\)\./,
    );
  });

  it("a value that could not be saved is named once, and keeps its type after a second process hop", async () => {
    const saver = new MemorySaver();
    await turn(middleware(), saver, "t4b", [
      "const counter = (() => { let n = 0; return () => ++n; })(); var step = 1",
    ]);
    const second = await turn(middleware(), saver, "t4b", ["step = 2"]);
    expect(notice(second.evals[0]!)).toMatch(/could not be saved and now throw when read: counter \(closure\)/);
    const third = await turn(middleware(), saver, "t4b", ["step", "counter()"]);
    expect(third.stored?.turn).toBe(second.stored!.turn);
    expect(section(third.evals[0]!, "result")).toBe("2");
    expect(notice(third.evals[0]!)).toBe("");
    expect(section(third.evals[1]!, "error")).toMatch(
      /Value for 'counter' was not restored because it is not serializable \(type: closure\)\./,
    );
  });

  it("a state over maxSnapshotBytes is not stored, the old one is cleared, and the model sees one line on its next eval", async () => {
    const saver = new MemorySaver();
    const m = middleware({ maxSnapshotBytes: 4096 });
    const small = await turn(m, saver, "t5", ["var small = 1"]);
    expect(small.stored?.ref).toBeTypeOf("string");
    const big = await turn(m, saver, "t5", ["var big = 'x'.repeat(20000); big.length"]);
    expect(big.stored?.ref).toBeUndefined();
    const next = await turn(m, saver, "t5", ["small"]);
    expect(notice(next.evals[0]!)).toMatch(
      /^The interpreter state was not saved at the end of the last turn \(INVALID_SNAPSHOT: .*\)/,
    );
    // Another process sees no stale snapshot and is told the same line.
    const elsewhere = await turn(middleware({ maxSnapshotBytes: 4096 }), saver, "t5", ["typeof small"]);
    expect(section(elsewhere.evals[0]!, "result")).toBe("undefined");
    expect(notice(elsewhere.evals[0]!)).toMatch(/^The interpreter state was not saved/);
  });
});

describe("a session evicted in the middle of a run", () => {
  it("comes back from the stored state on its next eval, and the model is told what was lost", async () => {
    const saver = new MemorySaver();
    const m = middleware({ maxLiveSessions: 1 });
    await turn(m, saver, "e1", ["var saved = 1"]);
    // A tool that makes another thread use the interpreter: with one live session, thread e1's is closed.
    const other = tool(
      async () => {
        await turn(m, saver, "e2", ["1 + 1"]);
        return "other thread ran";
      },
      { name: "other_thread", description: "Runs another conversation.", schema: z.object({}) },
    );
    const run = ++runs;
    const model = new ScriptedChatModel(
      [
        callTool("eval", { code: "var unsaved = 2" }, `c-${run}-0`),
        callTool("other_thread", {}, `c-${run}-1`),
        callTool("eval", { code: "[saved, typeof unsaved]" }, `c-${run}-2`),
        reply("done"),
      ].map((step, i) => Object.assign(step, { id: `run-${run}-${i}` })),
    );
    const agent = createAgent({ model, tools: [other], middleware: [m], checkpointer: saver });
    const result = await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: "e1" } });
    const last = toolMessages(result.messages as BaseMessage[]).at(-1)!;
    expect(section(last, "result")).toBe("[ 1, 'undefined' ]");
    expect(notice(last)).toMatch(
      /^The interpreter was closed between calls \(too many conversations at once\) and restored from the state saved at the end of the last turn/,
    );
  });
});

describe("rollback after a stopped eval", () => {
  it("a timed-out eval leaves the globals of the last completed eval, and the model is told", async () => {
    const saver = new MemorySaver();
    const m = middleware({ executionTimeoutMs: 200 });
    const run = await turn(m, saver, "r1", [
      "var n = 1; var list = [1]",
      "n = 2; list.push(2); while (true) {}",
      "[n, list]",
    ]);
    expect(section(run.evals[1]!, "error")).toMatch(/time/i);
    expect(notice(run.evals[1]!)).toMatch(
      /^Because this call was stopped \(TIMEOUT\), the interpreter was rolled back/,
    );
    expect(section(run.evals[2]!, "result")).toBe("[ 1, [ 1 ] ]");
    // The rolled-back state is what the thread stores.
    const later = await turn(middleware({ executionTimeoutMs: 200 }), saver, "r1", ["n"]);
    expect(section(later.evals[0]!, "result")).toBe("1");
  });

  it("a run whose last eval was stopped stores the rolled-back state, for this process and the next", async () => {
    const saver = new MemorySaver();
    const m = middleware({ executionTimeoutMs: 200 });
    await turn(m, saver, "r2", ["var kept = 41", "kept = 0; while (true) {}"]);
    expect(section((await turn(m, saver, "r2", ["kept + 1"])).evals[0]!, "result")).toBe("42");
    const elsewhere = await turn(middleware({ executionTimeoutMs: 200 }), saver, "r2", ["kept"]);
    expect(section(elsewhere.evals[0]!, "result")).toBe("41");
  });

  it("an eval that runs out of memory is rolled back too", async () => {
    const m = middleware({ memoryLimitBytes: 16 * 1024 * 1024 });
    const run = await turn(m, new MemorySaver(), "r3", [
      "var rows = [1]",
      "rows.push(2); const hog = []; while (true) hog.push(new Array(100000).fill(7))",
      "rows",
    ]);
    expect(notice(run.evals[1]!)).toMatch(
      /^Because this call was stopped \(OUT_OF_MEMORY\), the interpreter was rolled back/,
    );
    expect(section(run.evals[2]!, "result")).toBe("[ 1 ]");
  });

  it("a stopped first eval after a restore in a new process goes back to the restored state, not to a fresh interpreter", async () => {
    const saver = new MemorySaver();
    await turn(middleware({ executionTimeoutMs: 200, snapshotSigningKey: KEY }), saver, "r4", ["var kept = 41"]);
    const run = await turn(middleware({ executionTimeoutMs: 200, snapshotSigningKey: KEY }), saver, "r4", [
      "kept = 0; while (true) {}",
      "kept + 1",
    ]);
    expect(notice(run.evals[0]!)).toMatch(
      /^Because this call was stopped \(TIMEOUT\), the interpreter was rolled back/,
    );
    expect(section(run.evals[1]!, "result")).toBe("42");
    const later = await turn(middleware({ executionTimeoutMs: 200, snapshotSigningKey: KEY }), saver, "r4", ["kept"]);
    expect(section(later.evals[0]!, "result")).toBe("41");
  });

  it("a stop with no earlier completed eval starts fresh and says so", async () => {
    const run = await turn(middleware({ executionTimeoutMs: 200 }), new MemorySaver(), "r2", [
      "var early = 1; while (true) {}",
      "typeof early",
    ]);
    expect(notice(run.evals[0]!)).toMatch(/no earlier call completed, the interpreter starts fresh/);
    expect(section(run.evals[1]!, "result")).toBe("undefined");
  });
});

describe('modes "turn" and "call" keep nothing in graph state', () => {
  it('"turn" keeps state within a run only; "call" not even between evals', async () => {
    const saver = new MemorySaver();
    const m = middleware({ mode: "turn" });
    const first = await turn(m, saver, "m1", ["var x = 1", "x"]);
    expect(section(first.evals[1]!, "result")).toBe("1");
    expect(first.stored).toBeUndefined();
    const second = await turn(m, saver, "m1", ["typeof x"]);
    expect(section(second.evals[0]!, "result")).toBe("undefined");
    const call = await turn(middleware({ mode: "call" }), saver, "m2", ["var y = 1", "typeof y"]);
    expect(section(call.evals[1]!, "result")).toBe("undefined");
    expect(call.stored).toBeUndefined();
  });
});

describe("a stored snapshot that does not match its thread or turn", () => {
  const options = resolveOptions({ snapshotSigningKey: KEY });
  const persistence = new Persistence(options, sandboxOptions(options));

  async function storedFrom(code: string, threadId: string) {
    const sandbox = new Sandbox(sandboxOptions(options));
    try {
      sandbox.evalSync(code);
      return (await persistence.forSession("in-process").store(sandbox, undefined, threadId))!;
    } finally {
      sandbox.dispose();
    }
  }

  async function openFrom(stored: { turn: number; data?: string }, threadId: string) {
    const session = persistence.forSession("in-process");
    expect(session.prepare(stored, false)).toBe(true);
    await session.restore(threadId);
    const sandbox = session.open();
    try {
      return { found: sandbox.evalSync("typeof kept"), notices: session.takeNotices() };
    } finally {
      sandbox.dispose();
    }
  }

  it("restores on its own thread and turn", async () => {
    expect(await openFrom(await storedFrom("var kept = 1", "thread:a"), "thread:a")).toEqual({
      found: "number",
      notices: [],
    });
  });

  it.each([
    ["another thread's snapshot", (s: { turn: number; data?: string }) => s, "thread:b"],
    [
      "an older turn's snapshot replayed under a newer counter",
      (s: { turn: number; data?: string }) => ({ ...s, turn: s.turn + 1 }),
      "thread:a",
    ],
    [
      "a truncated snapshot",
      (s: { turn: number; data?: string }) => ({
        ...s,
        data: Buffer.from(s.data!, "base64").subarray(0, 40).toString("base64"),
      }),
      "thread:a",
    ],
  ])("refuses %s: fresh interpreter, one line saying why", async (_what, tamper, threadId) => {
    const { found, notices } = await openFrom(tamper(await storedFrom("var kept = 1", "thread:a")), threadId);
    expect(found).toBe("undefined");
    expect(notices).toHaveLength(1);
    expect(notices[0]).toMatch(
      /^The saved interpreter state from earlier turns could not be restored \(INVALID_SNAPSHOT: [^\n]+\): the interpreter started fresh/,
    );
  });
});

describe("stored size", () => {
  it("records of one shape are stored deflated: far smaller than their JSON", async () => {
    const saver = new MemorySaver();
    const run = await turn(middleware(), saver, "s1", [
      `var rows = Array.from({ length: 2000 }, (_, i) => ({ id: i, name: "row" + i, region: ["north", "south"][i % 2] })); JSON.stringify(rows).length`,
    ]);
    const jsonChars = Number(section(run.evals[0]!, "result"));
    // Kept in the checkpointer as chunks deflated one by one (private checkpoints, value in metadata).
    const kept = Object.entries(saver.storage["s1"] ?? {})
      .filter(([ns]) => ns.startsWith("__quickjs_native_blobs__"))
      .flatMap(([, checkpoints]) => Object.values(checkpoints))
      .reduce((bytes, [, metadata]) => bytes + metadata.length, 0);
    expect(run.stored?.at).toBe("checkpointer");
    expect(kept).toBeGreaterThan(0);
    expect(kept).toBeLessThan(jsonChars / 3);
  });
});
