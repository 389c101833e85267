import { createHash, createHmac } from "node:crypto";
import { serialize } from "node:v8";
import { InMemoryStore } from "@langchain/langgraph";
import { describe, expect, it } from "vitest";
import {
  checkpointerRecords,
  decodeRecord,
  encodeRecord,
  type RecordBinding,
  type ReplayRecord,
} from "../../src/langchain/journal.js";

const KEY = new TextEncoder().encode("a-signing-key-of-at-least-16-bytes");
const binding: RecordBinding = { key: KEY, threadId: "thread:t1", evalCallId: "call-1" };
const MAX = 1024 * 1024;
const SLOT = JSON.stringify(["", "checkpoint-1", "code-interpreter-replay:call-1:0"]);

function record(): ReplayRecord {
  return {
    codeDigest: "abc",
    clockMs: 1_700_000_000_000,
    randomSeed: 7,
    consoleLines: 2,
    entries: [
      // Settle order, not call order: position 2 (after the paused call) finished first.
      {
        kind: "tool",
        name: "charge_card",
        args: { amount: 5 },
        position: 2,
        reviewed: false,
        outcome: { ok: true, value: "charged", updates: [] },
      },
      {
        kind: "tool",
        name: "lookup",
        args: { name: "ada" },
        position: 0,
        reviewed: false,
        outcome: {
          ok: true,
          value: { when: new Date(0), tags: new Map([["a", 1]]), n: 10n },
          updates: [["files", { "/a": "x" }]],
        },
      },
    ],
    pausedAt: { kind: "task", name: "task", args: { description: "d", subagent_type: "general" }, position: 1 },
    startSnapshot: new Uint8Array([1, 2, 3]),
  };
}

/** A version 1 record: header, v8.serialize of the whole record, HMAC over domain, thread, eval call, body. */
function versionOneRecord(): string {
  const header = Buffer.alloc(12);
  header.write("QJSNJRNL", 0, "latin1");
  header.writeUInt16LE(1, 8);
  header.writeUInt16LE(1, 10);
  const body = Buffer.concat([header, serialize({ ...record(), entries: [] })]);
  const mac = createHmac("sha256", KEY)
    .update("quickjs-native replay journal\0")
    .update(binding.threadId)
    .update("\0")
    .update(binding.evalCallId)
    .update("\0")
    .update(body)
    .digest();
  return Buffer.concat([body, mac]).toString("base64");
}

/** A run config whose checkpointer keeps pending writes in `writes`, as LangGraph hands it to a task. */
function runConfig(writes: [string, string, unknown][]) {
  const saver = {
    async putWrites(_config: unknown, put: [string, unknown][], taskId: string) {
      for (const [channel, value] of put) writes.push([taskId, channel, value]);
    },
    async getTuple() {
      return { pendingWrites: writes };
    },
  };
  return {
    configurable: {
      thread_id: "t1",
      checkpoint_ns: "tools:abc",
      checkpoint_map: { "": "checkpoint-1" },
      __pregel_checkpointer: saver,
    },
  };
}

describe("replay records", () => {
  it("round-trip with typed values (Date, Map, BigInt), state updates, positions, settle order and the start snapshot", async () => {
    const decoded = await decodeRecord(await encodeRecord(record(), binding, SLOT, MAX), binding, SLOT, MAX);
    expect(decoded).toEqual(record());
  });

  it("round-trip a journal larger than one slice, stored as several pieces, and refuse it with a piece missing", async () => {
    const big = { ...record(), startSnapshot: new Uint8Array(5 * 1024 * 1024 + 7).fill(9) };
    const pieces = await encodeRecord(big, binding, SLOT, 8 * MAX);
    expect(pieces.length).toBe(14);
    await expect(decodeRecord(pieces.slice(0, 13), binding, SLOT, 8 * MAX)).rejects.toThrow(/signature does not match/);
    await expect(decodeRecord(pieces, binding, SLOT, 4 * MAX)).rejects.toThrow(/over maxSnapshotBytes/);
    const decoded = await decodeRecord(pieces, binding, SLOT, 8 * MAX);
    expect(Buffer.from(decoded.startSnapshot).equals(Buffer.from(big.startSnapshot))).toBe(true);
    expect(decoded.entries).toEqual(big.entries);
  });

  it("refuse a record of another thread, another eval call or another key", async () => {
    const data = await encodeRecord(record(), binding, SLOT, MAX);
    await expect(decodeRecord(data, { ...binding, threadId: "thread:t2" }, SLOT, MAX)).rejects.toThrow(
      /signature does not match/,
    );
    await expect(decodeRecord(data, { ...binding, evalCallId: "call-2" }, SLOT, MAX)).rejects.toThrow(
      /signature does not match/,
    );
    await expect(
      decodeRecord(data, { ...binding, key: new TextEncoder().encode("another-key-of-at-least-16-bytes") }, SLOT, MAX),
    ).rejects.toThrow(/signature does not match/);
  });

  it("refuse a record moved to another pause or another checkpoint (issue 27.3)", async () => {
    const data = await encodeRecord(record(), binding, SLOT, MAX);
    const pause1 = JSON.stringify(["", "checkpoint-1", "code-interpreter-replay:call-1:1"]);
    await expect(decodeRecord(data, binding, pause1, MAX)).rejects.toThrow(/signature does not match .*pause/);
    await expect(
      decodeRecord(data, binding, JSON.stringify(["", "checkpoint-2", "code-interpreter-replay:call-1:0"]), MAX),
    ).rejects.toThrow(/signature does not match/);
  });

  it("refuse a tampered byte, a foreign format, and a signed/unsigned mismatch", async () => {
    const bytes = Buffer.from((await encodeRecord(record(), binding, SLOT, MAX))[0]!, "base64");
    bytes[bytes.length - 40]! ^= 1;
    await expect(decodeRecord([bytes.toString("base64")], binding, SLOT, MAX)).rejects.toThrow(
      /signature does not match/,
    );
    await expect(
      decodeRecord([Buffer.from("not a record at all, not at all, no").toString("base64")], binding, SLOT, MAX),
    ).rejects.toThrow(/not a replay record/);
    await expect(decodeRecord(["%%%%"], binding, SLOT, MAX)).rejects.toThrow(/not a replay record/);
    await expect(decodeRecord("a string, not pieces", binding, SLOT, MAX)).rejects.toThrow(/not a replay record/);
    const unsigned = await encodeRecord(record(), { ...binding, key: undefined }, SLOT, MAX);
    await expect(decodeRecord(unsigned, binding, SLOT, MAX)).rejects.toThrow(/not signed, but a signing key is set/);
    expect((await decodeRecord(unsigned, { ...binding, key: undefined }, SLOT, MAX)).randomSeed).toBe(7);
  });

  it("refuse a version 1 record (cut at the paused position, not bound to its pause) with a typed error", async () => {
    await expect(decodeRecord([versionOneRecord()], binding, SLOT, MAX)).rejects.toMatchObject({
      name: "ReplayRecordError",
      message: expect.stringMatching(/format version 1; this build reads 2/),
    });
  });

  it("are stored in the checkpointer as pieces bound to their slot, and a version 1 row is read back to be refused by its version", async () => {
    const writes: [string, string, unknown][] = [];
    const config = runConfig(writes);
    const big = { ...record(), startSnapshot: new Uint8Array(1024 * 1024).fill(3) };
    await checkpointerRecords.save(config, "call-1", 0, big, binding, 8 * MAX);
    expect(writes.map(([task]) => task)).toEqual([
      "code-interpreter-replay:call-1:0:0",
      "code-interpreter-replay:call-1:0:1",
      "code-interpreter-replay:call-1:0:2",
    ]);
    expect((await checkpointerRecords.load(config, "call-1", 0, binding, 8 * MAX))?.entries).toEqual(big.entries);
    expect(await checkpointerRecords.load(config, "call-1", 1, binding, 8 * MAX)).toBeUndefined();
    writes.push(["code-interpreter-replay:call-1:1", "__code_interpreter_replay__", versionOneRecord()]);
    await expect(checkpointerRecords.load(config, "call-1", 1, binding, 8 * MAX)).rejects.toThrow(
      /format version 1; this build reads 2/,
    );
  });

  it("with a store, keep the record's bytes there and one short piece in the checkpointer, still bound to its pause (issue 27.5)", async () => {
    const writes: [string, string, unknown][] = [];
    const config = { ...runConfig(writes), store: new InMemoryStore() };
    const big = { ...record(), startSnapshot: new Uint8Array(3 * 1024 * 1024).fill(5) };
    await checkpointerRecords.save(config, "call-1", 0, big, binding, 8 * MAX);
    expect(writes).toHaveLength(1);
    expect(String(writes[0]![2])).toMatch(/^store:[0-9a-f]{32}$/);
    const loaded = await checkpointerRecords.load(config, "call-1", 0, binding, 8 * MAX);
    expect(Buffer.from(loaded!.startSnapshot).equals(Buffer.from(big.startSnapshot))).toBe(true);
    expect(loaded!.entries).toEqual(big.entries);
    await expect(checkpointerRecords.load(runConfig(writes), "call-1", 0, binding, 8 * MAX)).rejects.toThrow(
      /kept in the agent's store, but this run has no store/,
    );
    writes.push(["code-interpreter-replay:call-1:1:0", "__code_interpreter_replay__", writes[0]![2]]);
    await expect(checkpointerRecords.load(config, "call-1", 1, binding, 8 * MAX)).rejects.toThrow(
      /signature does not match/,
    );
  });

  it("refuse a signed record whose sections run past its end, before parsing them", async () => {
    const unsignedBinding = { ...binding, key: undefined };
    const bytes = Buffer.from((await encodeRecord(record(), unsignedBinding, SLOT, MAX))[0]!, "base64");
    const body = Buffer.from(bytes.subarray(0, bytes.length - 32));
    body.writeUInt32LE(0xffffffff, 12);
    const h = createHash("sha256")
      .update("quickjs-native replay journal v2\0")
      .update(binding.threadId)
      .update("\0")
      .update(binding.evalCallId)
      .update("\0")
      .update(SLOT)
      .update("\0")
      .update(body)
      .digest();
    await expect(
      decodeRecord([Buffer.concat([body, h]).toString("base64")], unsignedBinding, SLOT, MAX),
    ).rejects.toThrow(/unexpected shape/);
  });

  it("refuse a record that answers a position twice, or the paused position", async () => {
    const twice = { ...record(), entries: [record().entries[0]!, { ...record().entries[1]!, position: 2 }] };
    await expect(decodeRecord(await encodeRecord(twice, binding, SLOT, MAX), binding, SLOT, MAX)).rejects.toThrow(
      /unexpected shape/,
    );
    const paused = { ...record(), entries: [{ ...record().entries[0]!, position: 1 }] };
    await expect(decodeRecord(await encodeRecord(paused, binding, SLOT, MAX), binding, SLOT, MAX)).rejects.toThrow(
      /unexpected shape/,
    );
  });

  it("refuse to store a record over the size cap, saying so", async () => {
    await expect(encodeRecord(record(), binding, SLOT, 64)).rejects.toThrow(/over maxSnapshotBytes \(64\)/);
  });
});
