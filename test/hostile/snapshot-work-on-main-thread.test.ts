// Hazard: snapshot work on the Node main thread, whose cost the guest controls. Restoring
// re-creates guest functions and classes from their source, which runs guest code: a planted
// class `static {}` block ran for the whole execution budget on the main thread, stalling every
// other session. Writing walks the whole state: 2 million values took 1.3 s. `restoreAsync` and
// `snapshotAsync` do that work on an executor thread; the main thread keeps turning meanwhile.
import { describe, expect, it } from "vitest";
import { Sandbox, SandboxError } from "../../src/index.js";
import { sandbox, turnsWhile } from "./harness.js";

// Spins only when re-created by a restore (its source then runs from "<snapshot>").
const TRAP = "class Trap { static { if (new Error().stack.includes('<snapshot>')) for (;;) {} } }";

describe("restoreAsync runs re-created guest code off the main thread", () => {
  it("stops a spinning static block at the restore budget while the event loop keeps turning", async () => {
    const source = sandbox();
    source.evalSync(TRAP);
    const bytes = source.snapshot();
    const { turns, settled } = await turnsWhile(Sandbox.restoreAsync(bytes, { restoreTimeoutMs: 200 }));
    expect(settled.status).toBe("rejected");
    const err = (settled as PromiseRejectedResult).reason as SandboxError;
    expect(err).toBeInstanceOf(SandboxError);
    expect(err.code).toBe("TIMEOUT");
    // Run inline, the restore would have settled before the first turn.
    expect(turns).toBeGreaterThan(0);
  });

  it("restores the same state as the inline restore", async () => {
    const source = sandbox();
    source.evalSync(
      "var data = { n: 1, list: [1, 2, 3], big: 2n ** 100n }; function twice(x) { return 2 * x } class Point { constructor(x) { this.x = x } } var sym = Symbol('s');",
    );
    const bytes = source.snapshot();
    const inline = Sandbox.restore(bytes);
    const offThread = await Sandbox.restoreAsync(bytes);
    try {
      const probe = "[data, twice(21), new Point(3).x]";
      expect(offThread.sandbox.evalSync(probe)).toEqual(inline.sandbox.evalSync(probe));
      expect(offThread.notRestored).toEqual(inline.notRestored);
      expect(offThread.notRestored.length).toBeGreaterThan(0);
      expect(await offThread.sandbox.eval("twice(data.n)")).toBe(2);
    } finally {
      inline.sandbox.dispose();
      offThread.sandbox.dispose();
    }
  });

  it("refuses altered and signed-for-another-thread snapshots before any runtime runs", async () => {
    const source = sandbox();
    source.evalSync("var a = 1");
    const bytes = Uint8Array.from(source.snapshot());
    bytes[bytes.length - 40] ^= 1;
    await expect(Sandbox.restoreAsync(bytes)).rejects.toMatchObject({ code: "INVALID_SNAPSHOT" });
    const key = Buffer.alloc(32, 7);
    const signed = source.snapshot({ signing: { key, threadId: "t1", turn: 1 } });
    await expect(Sandbox.restoreAsync(signed, { signing: { key, threadId: "t2", turn: 1 } })).rejects.toMatchObject({
      code: "INVALID_SNAPSHOT",
    });
    const ok = await Sandbox.restoreAsync(signed, { signing: { key, threadId: "t1", turn: 1 } });
    expect(ok.sandbox.evalSync("a")).toBe(1);
    ok.sandbox.dispose();
  });
});

describe("snapshotAsync walks the state off the main thread", () => {
  it("writes the same bytes as snapshot() while the event loop keeps turning", async () => {
    const sb = sandbox({ memoryLimitBytes: 256 * 1024 * 1024 });
    sb.evalSync(
      "var rows = Array.from({ length: 50000 }, (_, i) => ({ id: i, name: 'row ' + i, tags: ['a', 'b'] })); function f() { return rows.length }",
    );
    const options = { maxSnapshotBytes: 200 * 1024 * 1024 };
    const inline = sb.snapshot(options);
    const { turns, settled } = await turnsWhile(sb.snapshotAsync(options));
    expect(settled.status).toBe("fulfilled");
    const offThread = (settled as PromiseFulfilledResult<Uint8Array>).value;
    expect(turns).toBeGreaterThan(0);
    expect(Buffer.compare(Buffer.from(offThread), Buffer.from(inline))).toBe(0);
  });

  // The digest of a sealed snapshot is computed 512 KiB per turn of the event loop (SHA-256 of a
  // 5 MB snapshot held the loop ~17 ms in one go): the slices must add up to snapshot()'s digest.
  it("signs a snapshot of several digest slices to the same bytes as snapshot()", async () => {
    const sb = sandbox();
    sb.evalSync("var text = 'abc'.repeat(1_000_000)");
    const options = {
      signing: { key: Buffer.alloc(32, 5), threadId: "t", turn: 1 },
      maxSnapshotBytes: 16 * 1024 * 1024,
    };
    const offThread = await sb.snapshotAsync(options);
    expect(offThread.length).toBeGreaterThan(2.5 * 1024 * 1024);
    expect(Buffer.compare(Buffer.from(offThread), Buffer.from(sb.snapshot(options)))).toBe(0);
    const { sandbox: restored } = await Sandbox.restoreAsync(offThread, options);
    restored.dispose();
  });

  it("compresses, signs, caps and queues like an eval", async () => {
    const sb = sandbox();
    sb.defineFunction("host", () => 1);
    sb.evalSync("var s = 'x'.repeat(100000); function g() { return s.length }");
    const key = Buffer.alloc(32, 9);
    const signing = { key, threadId: "t", turn: 3 };
    const [bytes, after] = await Promise.all([
      sb.snapshotAsync({ compress: true, signing }),
      sb.eval("s = 'changed'; 1"),
    ]);
    expect(after).toBe(1);
    expect(bytes.length).toBeLessThan(100000);
    const { sandbox: restored } = await Sandbox.restoreAsync(bytes, { signing });
    try {
      expect(restored.evalSync("[g(), typeof host]")).toEqual([100000, "undefined"]);
    } finally {
      restored.dispose();
    }
    sb.evalSync("s = 'x'.repeat(100000)");
    await expect(sb.snapshotAsync({ maxSnapshotBytes: 1024 })).rejects.toMatchObject({ code: "INVALID_SNAPSHOT" });
    sb.dispose();
    await expect(sb.snapshotAsync()).rejects.toMatchObject({ code: "DISPOSED" });
  });
});
