// runThenSnapshot: the eval's own executor job writes the snapshot right after the eval. It must
// hold exactly what a snapshotAsync queued behind the eval would, be sealed the same way, and never
// capture the state a stopped eval left behind.
import { describe, expect, it } from "vitest";
import { Sandbox, snapshotBody } from "../../src/index.js";
import { restored, sandbox } from "../hostile/harness.js"; // sandboxes disposed after the current test

describe("runThenSnapshot writes the state an eval left", () => {
  it("holds the same state as a snapshotAsync taken right after the eval", async () => {
    const sb = sandbox();
    const { report, snapshot, snapshotError } = await sb.runThenSnapshot(
      "var data = { list: [1, 2, 3], name: 'x' }; function f() { return data.list.length } f()",
    );
    expect(report).toMatchObject({ ok: true, value: 3 });
    expect(snapshotError).toBeUndefined();
    expect(snapshot).toBeInstanceOf(Uint8Array);
    expect(Buffer.compare(snapshotBody(snapshot!), snapshotBody(await sb.snapshotAsync()))).toBe(0);
    expect(restored(snapshot!).evalSync("f() + data.name")).toBe("3x");
  });

  it("keeps what an eval that threw had changed before the throw", async () => {
    const sb = sandbox();
    const { report, snapshot } = await sb.runThenSnapshot("var before = 41; throw new Error('late')");
    expect(report.ok).toBe(false);
    expect(report.ok || report.error.code).toBe("GUEST_ERROR");
    expect(restored(snapshot!).evalSync("before + 1")).toBe(42);
  });

  it("takes the state after its own eval, not after an eval queued behind it", async () => {
    const sb = sandbox();
    const [first] = await Promise.all([sb.runThenSnapshot("var x = 1; await Promise.resolve(); x"), sb.eval("x = 2")]);
    expect(first.report).toMatchObject({ ok: true, value: 1 });
    expect(restored(first.snapshot!).evalSync("x")).toBe(1);
    expect(sb.evalSync("x")).toBe(2);
  });

  it("leaves the host's functions out, as snapshotAsync does", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("lookup", async ([id]) => ({ id }));
    const { report, snapshot } = await sb.runThenSnapshot("var found = await lookup(7); found.id");
    expect(report).toMatchObject({ ok: true, value: 7 });
    const back = restored(snapshot!);
    expect(back.evalSync("typeof lookup + ':' + found.id")).toBe("undefined:7");
  });

  it("seals with the snapshot options: a signed snapshot restores only with its key", async () => {
    const sb = sandbox();
    const signing = { key: "k".repeat(32), threadId: "t", turn: 3 };
    const { snapshot } = await sb.runThenSnapshot("var kept = 'signed'", undefined, { signing, compress: true });
    expect(restored(snapshot!, { signing }).evalSync("kept")).toBe("signed");
    expect(() => Sandbox.restore(snapshot!, { signing: { ...signing, turn: 4 } })).toThrow(
      expect.objectContaining({ code: "INVALID_SNAPSHOT" }),
    );
  });
});

describe("runThenSnapshot never captures a stopped eval", () => {
  it("writes nothing after an eval stopped by its execution budget", async () => {
    const sb = sandbox();
    const result = await sb.runThenSnapshot("var half = 1; for (;;) {}", { timeoutMs: 50 });
    expect(result.report.ok || result.report.error.code).toBe("TIMEOUT");
    expect(result.snapshot).toBeUndefined();
    expect(result.snapshotError).toBeUndefined();
  });

  it("writes nothing after an aborted eval", async () => {
    const sb = sandbox();
    const controller = new AbortController();
    sb.defineAsyncFunction("wait", () => new Promise(() => controller.abort()));
    const result = await sb.runThenSnapshot("var half = 1; await wait()", { signal: controller.signal });
    expect(result.report.ok || result.report.error.code).toBe("ABORTED");
    expect(result.snapshot).toBeUndefined();
    expect(result.snapshotError).toBeUndefined();
  });

  it("writes nothing after an eval that ran out of memory", async () => {
    const sb = sandbox({ memoryLimitBytes: 8 * 1024 * 1024 });
    const result = await sb.runThenSnapshot("var grow = []; for (;;) grow.push('x'.repeat(1000) + grow.length)");
    expect(result.report.ok || result.report.error.code).toBe("OUT_OF_MEMORY");
    expect(result.snapshot).toBeUndefined();
  });
});

describe("a stop that comes after the eval ended leaves the snapshot write alone", () => {
  it("does not break the sandbox when the eval's wall budget runs out during a long write", async () => {
    const sb = sandbox({ memoryLimitBytes: 256 * 1024 * 1024 });
    // About half a second of CPU to write (within the snapshot's 2,000,000-value cap): past the
    // watchdog's grace once the wall budget is over.
    sb.evalSync("var big = Array.from({ length: 1900000 }, (_, i) => i + 0.5); undefined");
    const result = await sb.runThenSnapshot(
      "big.length",
      { wallTimeoutMs: 100 },
      { maxSnapshotBytes: 128 * 1024 * 1024 },
    );
    // On a loaded machine the eval itself may run out of its wall budget: then nothing is written.
    if (result.report.ok) expect(result.snapshot).toBeInstanceOf(Uint8Array);
    else expect(result.report.error.code).toBe("TIMEOUT");
    expect(await sb.eval("big.length")).toBe(1900000);
  });
});

describe("runThenSnapshot reports a snapshot it could not take", () => {
  it("gives the eval's report and INVALID_SNAPSHOT over maxSnapshotBytes", async () => {
    const sb = sandbox();
    const result = await sb.runThenSnapshot("var big = 'y'.repeat(100000); big.length", undefined, {
      maxSnapshotBytes: 4096,
    });
    expect(result.report).toMatchObject({ ok: true, value: 100000 });
    expect(result.snapshot).toBeUndefined();
    expect(result.snapshotError).toMatchObject({ code: "INVALID_SNAPSHOT" });
    // The sandbox goes on as usual.
    expect(await sb.eval("big.length")).toBe(100000);
  });

  it("refuses inline evals, whose state would be walked on the Node main thread", async () => {
    const sb = sandbox();
    await expect(sb.runThenSnapshot("1", { inline: true })).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
  });

  it("refuses bad snapshot options before running anything", async () => {
    const sb = sandbox();
    await expect(sb.runThenSnapshot("var ran = true", undefined, { maxSnapshotBytes: -1 })).rejects.toMatchObject({
      code: "INVALID_ARGUMENT",
    });
    expect(sb.evalSync("typeof ran")).toBe("undefined");
  });
});
