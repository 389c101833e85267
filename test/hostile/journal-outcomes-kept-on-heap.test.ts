// Hazard: resuming a paused eval with a large journal (500 tool results of 100 KB) decoded every
// outcome up front and kept it on the JavaScript heap for the whole replay: each young-generation
// collection copied the surviving results on the main thread (30-40 ms pauses). Outcomes are now
// decoded from the record's checked bytes when the replay answers their call.
import { setFlagsFromString } from "node:v8";
import { runInNewContext } from "node:vm";
import { describe, expect, it } from "vitest";
import { decodeRecord, encodeRecord, type ReplayRecord } from "../../src/langchain/journal.js";

setFlagsFromString("--expose-gc");
const collect = runInNewContext("gc") as () => void;

describe("a decoded journal", () => {
  it("keeps its entries' outcomes off the heap until they are read", async () => {
    const binding = {
      key: new TextEncoder().encode("a-signing-key-of-at-least-16-bytes"),
      threadId: "thread:t",
      evalCallId: "eval-1",
    };
    const count = 200;
    const result = (position: number): string => `${position}`.padEnd(100_000, ".");
    const entries = Array.from({ length: count }, (_, position) => ({
      kind: "tool" as const,
      name: "fetch",
      args: { position },
      position,
      reviewed: false,
      outcome: { ok: true as const, value: result(position), updates: [] },
    }));
    const record: ReplayRecord = {
      codeDigest: "c",
      clockMs: 0,
      randomSeed: 1,
      consoleLines: 0,
      entries,
      pausedAt: { kind: "tool", name: "send_email", args: {}, position: count },
      startSnapshot: new Uint8Array(16),
    };
    const pieces = await encodeRecord(record, binding, "slot", 64 * 1024 * 1024);
    record.entries = [];
    collect();
    const before = process.memoryUsage().heapUsed;
    const decoded = await decodeRecord(pieces, binding, "slot", 64 * 1024 * 1024);
    collect();
    const held = process.memoryUsage().heapUsed - before;
    // Decoded up front, the 20 MB of results stayed (measured: 20.0 MB held; 7.5 MB with them on demand).
    expect(held).toBeLessThan(12_000_000);
    expect(decoded.entries).toHaveLength(count);
    expect(decoded.entries[7]!.outcome).toEqual({ ok: true, value: result(7), updates: [] });
    expect(decoded.entries[7]!.args).toEqual({ position: 7 });
  });
});
