/**
 * Interpreter state in the agent's store (mode "thread" with `store`): graph state holds a short
 * reference, the store holds content-addressed chunks written once; a turn stores what changed;
 * a missing, altered or foreign chunk is refused in one line and the interpreter starts fresh;
 * old states are collected per thread. Also the embedded SqliteStore.
 */
import { createHash } from "node:crypto";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, describe, expect, it } from "vitest";
import { createAgent } from "langchain";
import { HumanMessage, type BaseMessage } from "@langchain/core/messages";
import { InMemoryStore, MemorySaver, type BaseCheckpointSaver, type BaseStore } from "@langchain/langgraph";
import { SqliteSaver } from "@langchain/langgraph-checkpoint-sqlite";
import Database from "better-sqlite3";
import { createCodeInterpreterMiddleware, type CodeInterpreterMiddleware } from "../../src/langchain/index.js";
import { KEPT_SNAPSHOTS_PER_THREAD, SNAPSHOT_STATE_KEY } from "../../src/langchain/persistence.js";
import { chunkBoundaries, ThreadBlobs } from "../../src/langchain/thread-blobs.js";
import { SqliteStore } from "../../src/langchain/sqlite-store.js";
import { ScriptedChatModel, callTool, contentText, reply, toolMessages } from "./support/agent.js";

const KEY = "0123456789abcdef-signing-key";
const ROWS = `var rows = Array.from({ length: 10000 }, (_, i) => ({ id: i, name: "row-" + i, v: i * 2 })); rows.length`;
const dir = mkdtempSync(join(tmpdir(), "qjsn-thread-storage-"));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const live: CodeInterpreterMiddleware[] = [];
afterEach(() => {
  for (const m of live.splice(0)) m.dispose();
});

function middleware(): CodeInterpreterMiddleware {
  const m = createCodeInterpreterMiddleware({ snapshotSigningKey: KEY });
  live.push(m);
  return m;
}

let runs = 0;

/** One agent run on `threadId` making one eval; returns the eval's text and the stored graph-state value. */
async function turn(
  interpreter: CodeInterpreterMiddleware,
  checkpointer: BaseCheckpointSaver,
  store: BaseStore | undefined,
  threadId: string,
  code: string,
) {
  const run = ++runs;
  const steps = [callTool("eval", { code }, `call-${run}`), reply("done")];
  steps.forEach((step, i) => {
    step.id = `run-${run}-${i}`;
  });
  const agent = createAgent({
    model: new ScriptedChatModel(steps),
    tools: [],
    middleware: [interpreter],
    checkpointer,
    store,
  });
  const config = { configurable: { thread_id: threadId } };
  const result = await agent.invoke({ messages: [new HumanMessage("go")] }, config);
  const text = contentText(toolMessages(result.messages as BaseMessage[]).at(-1)!);
  const state = (await agent.getState(config)).values as Record<string, unknown>;
  return { text, stored: state[SNAPSHOT_STATE_KEY] as { turn: number; data?: string; ref?: string } | undefined };
}

function result(text: string): string | undefined {
  return /<result>\n?([\s\S]*?)\n?<\/result>/.exec(text)?.[1];
}

function notice(text: string): string {
  return /<notice>\n?([\s\S]*?)\n?<\/notice>/.exec(text)?.[1] ?? "";
}

/** Every item the store holds, with the size of its JSON value. */
async function items(store: BaseStore) {
  const found = await store.search([], { limit: 100_000 });
  return found.map((item) => ({ key: item.key, namespace: item.namespace, bytes: JSON.stringify(item.value).length }));
}

async function storedBytes(store: BaseStore): Promise<number> {
  return (await items(store)).reduce((sum, item) => sum + item.bytes, 0);
}

describe("state kept in the agent's store", () => {
  it("graph state holds only a turn and a reference, and a new middleware instance continues the thread from the store", async () => {
    const saver = new MemorySaver();
    const store = new InMemoryStore();
    const first = await turn(
      middleware(),
      saver,
      store,
      "t",
      `const data = [1, 2, 3]; function twice(x) { return 2 * x; } class Box { constructor(v) { this.v = v; } get() { return this.v; } } var box = new Box(7); var seen = new Map([["a", 1]]);`,
    );
    expect(notice(first.text)).toBe("");
    expect(first.stored).toEqual({ turn: 1, ref: expect.stringMatching(/^[0-9a-f]{32}$/) });
    expect(JSON.stringify(first.stored).length).toBeLessThan(100);
    const second = await turn(
      middleware(),
      saver,
      store,
      "t",
      `[data.map(twice).join(","), box.get(), box instanceof Box, seen.get("a")]`,
    );
    expect(notice(second.text)).toBe("");
    expect(result(second.text)).toBe(`[ '2,4,6', 7, true, 1 ]`);
  });

  it("a run that never evals (its store read started and abandoned) leaves the next run's restore intact", async () => {
    const saver = new MemorySaver();
    const store = new InMemoryStore();
    await turn(middleware(), saver, store, "t", "var kept = [1, 2, 3]");
    const fresh = middleware();
    const run = ++runs;
    const chat = reply("no code this time");
    chat.id = `run-${run}-0`;
    const agent = createAgent({
      model: new ScriptedChatModel([chat]),
      tools: [],
      middleware: [fresh],
      checkpointer: saver,
      store,
    });
    await agent.invoke({ messages: [new HumanMessage("hi")] }, { configurable: { thread_id: "t" } });
    const back = await turn(fresh, saver, store, "t", "kept.length");
    expect(notice(back.text)).toBe("");
    expect(result(back.text)).toBe("3");
  });

  it("a run that changes nothing writes nothing: same turn, same reference, no new store item", async () => {
    const saver = new MemorySaver();
    const store = new InMemoryStore();
    const interpreter = middleware();
    const first = await turn(interpreter, saver, store, "t", "var kept = { a: 1 }");
    const before = await items(store);
    const again = await turn(interpreter, saver, store, "t", "kept.a + 1");
    expect(again.stored).toEqual(first.stored);
    expect(await items(store)).toEqual(before);
    // A fresh process that restored the state and only read it does not write it again either.
    const elsewhere = await turn(middleware(), saver, store, "t", "kept.a + 2");
    expect(result(elsewhere.text)).toBe("3");
    expect(elsewhere.stored).toEqual(first.stored);
  });

  it("a one-row change of a 10,000-row state adds a few chunks, not the state again", async () => {
    const saver = new MemorySaver();
    const store = new InMemoryStore();
    const interpreter = middleware();
    await turn(interpreter, saver, store, "t", ROWS);
    const first = await storedBytes(store);
    const changed = await turn(
      interpreter,
      saver,
      store,
      "t",
      `rows[5000] = { id: 5000, name: "renamed row", v: -1 }; rows[5000].name`,
    );
    expect(result(changed.text)).toBe("renamed row");
    const added = (await storedBytes(store)) - first;
    expect(first).toBeGreaterThan(50_000);
    expect(added).toBeLessThan(16_000);
    const restored = await turn(middleware(), saver, store, "t", "[rows.length, rows[5000].name, rows[9999].v]");
    expect(result(restored.text)).toBe("[ 10000, 'renamed row', 19998 ]");
  });

  it("keeps the last KEPT_SNAPSHOTS_PER_THREAD states of a thread and collects older ones with their chunks", async () => {
    const saver = new MemorySaver();
    const store = new InMemoryStore();
    const interpreter = middleware();
    const refs: string[] = [];
    for (let i = 0; i < KEPT_SNAPSHOTS_PER_THREAD + 3; i++) {
      // Every state unshared: each turn replaces the whole value.
      const r = await turn(interpreter, saver, store, "t", `var blob = "x${i}".repeat(3000) + Math.random()`);
      refs.push(r.stored!.ref!);
    }
    const held = await items(store);
    expect(held.filter((item) => item.key.startsWith("blob:"))).toHaveLength(KEPT_SNAPSHOTS_PER_THREAD);
    expect(held.some((item) => item.key === `blob:${refs[0]}`)).toBe(false);
    // Chunks of collected states are gone too: the store is bounded by the kept states.
    const chunks = held.filter((item) => item.key.startsWith("chunk:")).length;
    expect(chunks).toBeLessThanOrEqual(KEPT_SNAPSHOTS_PER_THREAD * 3);
  });

  it("another thread's state is collected on its own: writing one thread never removes another's", async () => {
    const saver = new MemorySaver();
    const store = new InMemoryStore();
    const interpreter = middleware();
    await turn(interpreter, saver, store, "a", "var kept = 'a'");
    for (let i = 0; i < KEPT_SNAPSHOTS_PER_THREAD + 2; i++)
      await turn(interpreter, saver, store, "b", `var kept = ${i} + Math.random()`);
    const back = await turn(middleware(), saver, store, "a", "kept");
    expect(notice(back.text)).toBe("");
    expect(result(back.text)).toBe("a");
  });
});

describe("a stored state that is missing, altered or foreign", () => {
  async function storedThread() {
    const saver = new MemorySaver();
    const store = new InMemoryStore();
    await turn(middleware(), saver, store, "t", `var kept = "secret".repeat(2000) + "end"; kept.length`);
    const chunk = (await store.search([], { limit: 1000 })).find((item) => item.key.startsWith("chunk:"))!;
    return { saver, store, chunk };
  }

  async function expectRefused(saver: MemorySaver, store: BaseStore, reason: RegExp) {
    const back = await turn(middleware(), saver, store, "t", "typeof kept");
    const line = notice(back.text);
    expect(line.split("\n")).toHaveLength(1);
    expect(line).toMatch(
      /^The saved interpreter state from earlier turns could not be restored \(INVALID_SNAPSHOT: [^\n]+\): the interpreter started fresh/,
    );
    expect(line).toMatch(reason);
    expect(result(back.text)).toBe("undefined");
  }

  it("a missing chunk", async () => {
    const { saver, store, chunk } = await storedThread();
    await store.delete(chunk.namespace, chunk.key);
    await expectRefused(saver, store, /chunk of the stored state is missing/);
  });

  it("an altered chunk", async () => {
    const { saver, store, chunk } = await storedThread();
    const other = Buffer.from("var kept = 'forged'").toString("base64");
    await store.put(chunk.namespace, chunk.key, { ...chunk.value, z: other });
    await expectRefused(saver, store, /chunk of the stored state (does not inflate|does not match)/);
  });

  it("a chunk whose digest matches but whose bytes are another thread's (re-signed manifest): the signature refuses it", async () => {
    const { saver, store } = await storedThread();
    // Another thread, same key, stores its own state; its manifest and chunks are copied over this thread's.
    const foreign = new InMemoryStore();
    await turn(
      middleware(),
      new MemorySaver(),
      foreign,
      "intruder",
      `var kept = "secret".repeat(2000) + "end"; kept.length`,
    );
    const ours = (await store.search([], { limit: 1000 }))[0]!.namespace;
    for (const item of await foreign.search([], { limit: 1000 })) await store.put(ours, item.key, item.value);
    const blob = (await foreign.search([], { limit: 1000 })).find((item) => item.key.startsWith("blob:"))!;
    const state = await saver.getTuple({ configurable: { thread_id: "t" } });
    const stored = state!.checkpoint.channel_values[SNAPSHOT_STATE_KEY] as { turn: number; ref: string };
    stored.ref = blob.key.slice("blob:".length);
    await saver.put(state!.config, state!.checkpoint, state!.metadata!, {});
    await expectRefused(saver, store, /signature does not match/);
  });

  it("an agent given no store, on a thread whose state is in one", async () => {
    const { saver } = await storedThread();
    const run = ++runs;
    const steps = [callTool("eval", { code: "typeof kept" }, `call-${run}`), reply("done")];
    steps.forEach((step, i) => {
      step.id = `run-${run}-${i}`;
    });
    const agent = createAgent({
      model: new ScriptedChatModel(steps),
      tools: [],
      middleware: [middleware()],
      checkpointer: saver,
    });
    const out = await agent.invoke({ messages: [new HumanMessage("go")] }, { configurable: { thread_id: "t" } });
    const text = contentText(toolMessages(out.messages as BaseMessage[]).at(-1)!);
    expect(notice(text)).toMatch(
      /^The saved interpreter state from earlier turns could not be restored \(INVALID_SNAPSHOT: the state is kept in a store, and this agent was given none\)/,
    );
    expect(result(text)).toBe("undefined");
  });

  it("a store that lost the whole state (another store, or collected)", async () => {
    const { saver } = await storedThread();
    await expectRefused(saver, new InMemoryStore(), /no longer in the store/);
  });
});

describe("state kept in the checkpointer (no store)", () => {
  /** Bytes the interpreter state takes in a SQLite checkpointer file for `thread`: its graph-state key in every checkpoint and write, and the private checkpoints of its chunks. */
  function interpreterBytes(file: string, thread: string): number {
    const db = new Database(file, { readonly: true });
    try {
      let bytes = Number(
        (
          db
            .prepare("SELECT sum(length(value)) AS n FROM writes WHERE thread_id = ? AND channel = ?")
            .get(thread, SNAPSHOT_STATE_KEY) as { n: number | null }
        ).n ?? 0,
      );
      for (const row of db
        .prepare("SELECT checkpoint_ns, checkpoint, metadata FROM checkpoints WHERE thread_id = ?")
        .iterate(thread) as Iterable<{ checkpoint_ns: string; checkpoint: Buffer; metadata: Buffer }>) {
        if (row.checkpoint_ns.startsWith("__quickjs_native_blobs__")) {
          bytes += row.checkpoint.length + row.metadata.length;
          continue;
        }
        const value = (JSON.parse(row.checkpoint.toString("utf8")) as { channel_values?: Record<string, unknown> })
          .channel_values?.[SNAPSHOT_STATE_KEY];
        if (value !== undefined) bytes += Buffer.byteLength(JSON.stringify(value));
      }
      return bytes;
    } finally {
      db.close();
    }
  }

  it("a read-only turn of a 10,000-row state adds under 8 KB to a SQLite checkpointer, seven turns under twice the first", async () => {
    const file = join(dir, "no-store.sqlite");
    const saver = SqliteSaver.fromConnString(file);
    const m = middleware();
    const added: number[] = [];
    let before = 0;
    const codes = [
      ROWS,
      "rows.length",
      "rows[10].v = -1; rows[10].v",
      "rows.length + 1",
      "rows[20].v = -2; rows[20].v",
      "rows.length + 2",
      "rows[30].v = -3; rows[30].v",
    ];
    for (const code of codes) {
      const { text, stored } = await turn(m, saver, undefined, "t", code);
      expect(notice(text)).toBe("");
      expect(stored).toMatchObject({ ref: expect.any(String), at: "checkpointer" });
      const now = interpreterBytes(file, "t");
      added.push(now - before);
      before = now;
    }
    for (const i of [1, 3, 5]) expect(added[i]).toBeLessThanOrEqual(8 * 1024);
    expect(before).toBeLessThanOrEqual(2 * added[0]!);
    // Another middleware instance (a new process) continues the thread from the checkpointer alone.
    const back = await turn(middleware(), saver, undefined, "t", "rows[30].v + rows.length");
    expect(notice(back.text)).toBe("");
    expect(result(back.text)).toBe("9997");
  });

  it("a chunk altered in the checkpointer is refused in one line and the interpreter starts fresh", async () => {
    const saver = new MemorySaver();
    await turn(middleware(), saver, undefined, "t", ROWS);
    const chunks = Object.entries(saver.storage["t"] ?? {})
      .filter(([ns]) => ns.startsWith("__quickjs_native_blobs__"))
      .flatMap(([ns, checkpoints]) =>
        Object.keys(checkpoints)
          .filter((id) => id.startsWith("chunk:"))
          .map((id) => ({ ns, id })),
      );
    expect(chunks.length).toBeGreaterThan(1);
    const { ns, id } = chunks[0]!;
    const tuple = await saver.getTuple({ configurable: { thread_id: "t", checkpoint_ns: ns, checkpoint_id: id } });
    const other = (await saver.getTuple({
      configurable: { thread_id: "t", checkpoint_ns: ns, checkpoint_id: chunks[1]!.id },
    }))!.metadata as Record<string, unknown>;
    await saver.put(
      { configurable: { thread_id: "t", checkpoint_ns: ns } },
      tuple!.checkpoint,
      { ...tuple!.metadata!, quickjs_native_blob: other["quickjs_native_blob"] } as typeof tuple.metadata & object,
      {},
    );
    const back = await turn(middleware(), saver, undefined, "t", "typeof rows");
    expect(notice(back.text)).toMatch(
      /^The saved interpreter state from earlier turns could not be restored \(INVALID_SNAPSHOT: a chunk of the stored state does not match its digest/,
    );
    expect(result(back.text)).toBe("undefined");
  });
});

describe("content-defined chunks", () => {
  it("inserting bytes in the middle moves the boundaries around the insertion only", () => {
    // Deterministic pseudo-random bytes: SHA-256 in counter mode.
    const bytes = Buffer.concat(
      Array.from({ length: 300_000 / 32 }, (_, i) => createHash("sha256").update(String(i)).digest()),
    );
    const edited = Buffer.concat([bytes.subarray(0, 150_000), Buffer.from("an inserted row"), bytes.subarray(150_000)]);
    const chunksOf = (b: Buffer) => {
      const ends = chunkBoundaries(b);
      return ends.map((end, i) => b.subarray(i === 0 ? 0 : ends[i - 1]!, end).toString("hex"));
    };
    const before = new Set(chunksOf(bytes));
    const after = chunksOf(edited);
    expect(after.length).toBeGreaterThan(10);
    expect(after.filter((c) => !before.has(c)).length).toBeLessThanOrEqual(2);
  });
});

describe("collection of chunks shared between states", () => {
  it("every kept state reads back byte for byte after older ones sharing its chunks were collected; collected ones are refused", async () => {
    const store = new InMemoryStore();
    const blobs = new ThreadBlobs(store, "thread:t", "snapshot", 3);
    const base = Buffer.concat(
      Array.from({ length: 200_000 / 32 }, (_, i) => createHash("sha256").update(`b${i}`).digest()),
    );
    const versions: Buffer[] = [];
    const refs: string[] = [];
    for (let v = 0; v < 7; v++) {
      // Each version edits one spot of the same base: most chunks are shared by every version.
      const bytes = Buffer.from(base);
      bytes.write(`version ${v}`, 20_000 * v + 5000);
      versions.push(bytes);
      refs.push(await blobs.write(bytes));
    }
    for (const v of [4, 5, 6]) expect(Buffer.from(await blobs.read(refs[v]!, 1 << 20)).equals(versions[v]!)).toBe(true);
    for (const v of [0, 3]) await expect(blobs.read(refs[v]!, 1 << 20)).rejects.toThrow(/no longer in the store/);
    const chunks = (await store.search([], { limit: 10_000 })).filter((item) => item.key.startsWith("chunk:"));
    // The base's chunks once, plus a few edited chunks per kept state: not 3 copies of the state.
    expect(chunks.length).toBeLessThan(chunkBoundaries(base).length + 3 * 4);
  });
});

describe("SqliteStore", () => {
  it("gets, puts, deletes, searches by prefix and filter, and lists namespaces; data survives reopening", async () => {
    const file = join(dir, "store.sqlite");
    const store = new SqliteStore(file);
    await store.put(["a", "b"], "k1", { n: 1, tag: "x" });
    await store.put(["a", "b"], "k2", { n: 5, tag: "y" });
    await store.put(["a", "c"], "k3", { n: 9, tag: "x" });
    await store.put(["ab"], "k4", { n: 2 });
    await store.put(["a", "b"], "k1", { n: 2, tag: "x" });
    expect((await store.get(["a", "b"], "k1"))?.value).toEqual({ n: 2, tag: "x" });
    expect((await store.search(["a"], { limit: 10 })).map((i) => i.key).sort()).toEqual(["k1", "k2", "k3"]);
    expect((await store.search(["a"], { filter: { tag: "x", n: { $gt: 2 } } })).map((i) => i.key)).toEqual(["k3"]);
    expect(await store.listNamespaces({ prefix: ["a"] })).toEqual([
      ["a", "b"],
      ["a", "c"],
    ]);
    expect(await store.listNamespaces({ maxDepth: 1 })).toEqual([["a"], ["ab"]]);
    await store.delete(["a", "b"], "k2");
    store.close();
    const reopened = new SqliteStore(file);
    expect(await reopened.get(["a", "b"], "k2")).toBeNull();
    expect((await reopened.get(["ab"], "k4"))?.value).toEqual({ n: 2 });
    await expect(reopened.search(["a"], { query: "semantic" })).rejects.toThrow(/no vector index/);
    reopened.close();
  });

  it("keeps a thread's interpreter state for a SQLite-only agent", async () => {
    const store = new SqliteStore(join(dir, "agent-store.sqlite"));
    try {
      const saver = new MemorySaver();
      await turn(middleware(), saver, store, "t", "var kept = new Map([[1, 'one']])");
      const back = await turn(middleware(), saver, store, "t", "kept.get(1)");
      expect(notice(back.text)).toBe("");
      expect(result(back.text)).toBe("one");
    } finally {
      store.close();
    }
  });
});
