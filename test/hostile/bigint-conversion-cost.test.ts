// Hazard: a BigInt crossing the boundary as decimal text costs quadratic time to convert, after
// the guest's clock stopped and (on the host side) on the Node main thread: `[b, b, b]` with
// `b = 2n ** 1000000n` took 6.6 s, and a snapshot holding one stalled the event loop 4.4 s.
// BigInts now cross as hex (linear both ways). These tests pin the exact values through every
// bridge; the timing is measured in bench/, not asserted here.
import { createHash } from "node:crypto";
import { describe, expect, it } from "vitest";
import { Sandbox, inspectSnapshot } from "../../src/index.js";
import { sandbox } from "./harness.js";

const SAMPLES = [0n, 1n, -1n, 15n, -16n, 255n, -256n, 2n ** 63n, -(2n ** 64n) + 1n, 10n ** 40n, -(3n ** 200n)];

describe("BigInts cross as linear hex, exactly", () => {
  it("keeps every sample exact in both directions and through host calls", async () => {
    const sb = sandbox();
    sb.setGlobal("samples", SAMPLES);
    expect(sb.evalSync("samples.map(String)")).toEqual(SAMPLES.map(String));
    expect(sb.evalSync("samples")).toEqual(SAMPLES);
    sb.defineFunction("echo", (v) => v);
    expect(sb.evalSync("samples.every((s) => echo(s) === s)")).toBe(true);
    sb.defineAsyncFunction("later", async ([v]) => v);
    expect(await sb.eval("(await Promise.all(samples.map(later))).every((s, i) => s === samples[i])")).toBe(true);
  });

  it("returns three references to a million-bit BigInt under a 1 s budget", async () => {
    const sb = sandbox({ executionTimeoutMs: 1000 });
    const b = 2n ** 1000000n;
    const value = (await sb.eval("const b = 2n ** 1000000n; [b, -b, b]")) as bigint[];
    expect(value).toEqual([b, -b, b]);
    expect(sb.evalSync("2n ** 1000000n - 1n")).toBe(b - 1n);
  });

  it("snapshots and restores a million-bit BigInt exactly", () => {
    const sb = sandbox();
    sb.evalSync("var big = -(2n ** 1000000n) + 12345n");
    const bytes = sb.snapshot();
    expect(inspectSnapshot(bytes).formatVersion).toBe(2);
    const { sandbox: restored } = Sandbox.restore(bytes);
    try {
      expect(restored.evalSync("big === -(2n ** 1000000n) + 12345n")).toBe(true);
    } finally {
      restored.dispose();
    }
  });

  it("still reads snapshot format 1, whose BigInts are decimal text", () => {
    const sb = sandbox();
    sb.evalSync("var old = -1234567890123456789012345678901234567890n");
    const v2 = Buffer.from(sb.snapshot());
    // Rewrite the body as version 1 wrote it: tag 0x06 and decimal text instead of tag 0x1a and hex.
    const hex = 1234567890123456789012345678901234567890n.toString(16);
    const hexTag = Buffer.concat([Buffer.from([0x1a, 0x14]), u32(hex.length + 1), Buffer.from(`-${hex}`, "latin1")]);
    const decimal = "-1234567890123456789012345678901234567890";
    const decimalTag = Buffer.concat([Buffer.from([0x06, 0x14]), u32(decimal.length), Buffer.from(decimal, "latin1")]);
    const body = v2.subarray(32, v2.length - 32);
    const at = body.indexOf(hexTag);
    expect(at).toBeGreaterThan(0);
    const v1 = sealedV1(Buffer.concat([body.subarray(0, at), decimalTag, body.subarray(at + hexTag.length)]));
    const { sandbox: restored } = Sandbox.restore(v1);
    try {
      expect(restored.evalSync("old === -1234567890123456789012345678901234567890n")).toBe(true);
    } finally {
      restored.dispose();
    }
  });
});

function u32(n: number): Buffer {
  const b = Buffer.alloc(4);
  b.writeUInt32LE(n);
  return b;
}

/** An unsigned, uncompressed format-1 snapshot around `body`, as src/snapshot.ts lays it out. */
function sealedV1(body: Uint8Array): Uint8Array {
  const out = Buffer.alloc(32 + body.length + 32);
  out.write("QJSNSNAP", 0, "latin1");
  out.writeUInt16LE(1, 8);
  out.writeUInt32LE(body.length, 12);
  out.write("0.17.0", 24, "latin1");
  out.set(body, 32);
  createHash("sha256")
    .update(out.subarray(0, 32 + body.length))
    .digest()
    .copy(out, 32 + body.length);
  return out;
}
