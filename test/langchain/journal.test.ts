import { describe, expect, it } from "vitest";
import { decodeRecord, encodeRecord, type RecordBinding, type ReplayRecord } from "../../src/langchain/journal.js";

const KEY = new TextEncoder().encode("a-signing-key-of-at-least-16-bytes");
const binding: RecordBinding = { key: KEY, threadId: "thread:t1", evalCallId: "call-1" };
const MAX = 1024 * 1024;

function record(): ReplayRecord {
  return {
    codeDigest: "abc",
    clockMs: 1_700_000_000_000,
    randomSeed: 7,
    consoleLines: 2,
    entries: [
      { kind: "tool", name: "lookup", args: { name: "ada" }, reviewed: false, outcome: { ok: true, value: { when: new Date(0), tags: new Map([["a", 1]]), n: 10n }, updates: [["files", { "/a": "x" }]] } },
      { kind: "tool", name: "send_email", args: { to: "a" }, reviewed: true, outcome: { ok: false, error: { name: "ToolCallRejectedError", message: "no" } } },
    ],
    pausedAt: { kind: "task", name: "task", args: { description: "d", subagent_type: "general" } },
    startSnapshot: new Uint8Array([1, 2, 3]),
  };
}

describe("replay records", () => {
  it("round-trip with typed values (Date, Map, BigInt), state updates and the start snapshot", () => {
    const decoded = decodeRecord(encodeRecord(record(), binding, MAX), binding, MAX);
    expect(decoded).toEqual(record());
  });

  it("refuse a record of another thread, another eval call or another key", () => {
    const data = encodeRecord(record(), binding, MAX);
    expect(() => decodeRecord(data, { ...binding, threadId: "thread:t2" }, MAX)).toThrow(/signature does not match/);
    expect(() => decodeRecord(data, { ...binding, evalCallId: "call-2" }, MAX)).toThrow(/signature does not match/);
    expect(() => decodeRecord(data, { ...binding, key: new TextEncoder().encode("another-key-of-at-least-16-bytes") }, MAX)).toThrow(/signature does not match/);
  });

  it("refuse a tampered byte, a foreign format, and a signed/unsigned mismatch", () => {
    const bytes = Buffer.from(encodeRecord(record(), binding, MAX), "base64");
    bytes[bytes.length - 40]! ^= 1;
    expect(() => decodeRecord(bytes.toString("base64"), binding, MAX)).toThrow(/signature does not match/);
    expect(() => decodeRecord(Buffer.from("not a record at all, not at all, no").toString("base64"), binding, MAX)).toThrow(/not a replay record/);
    const unsigned = encodeRecord(record(), { ...binding, key: undefined }, MAX);
    expect(() => decodeRecord(unsigned, binding, MAX)).toThrow(/not signed, but a signing key is set/);
    expect(decodeRecord(unsigned, { ...binding, key: undefined }, MAX).randomSeed).toBe(7);
  });

  it("refuse to store a record over the size cap, saying so", () => {
    expect(() => encodeRecord(record(), binding, 64)).toThrow(/over maxSnapshotBytes \(64\)/);
  });
});
