import { afterEach, describe, expect, it } from "vitest";
import { inspectSnapshot, resealSnapshot, Sandbox, SandboxError, snapshotBody } from "../../src/index.js";

const live: Sandbox[] = [];
afterEach(() => {
  for (const sb of live.splice(0)) sb.dispose();
});

const KEY = "k".repeat(32);
const MAX = 16 << 20;

function sandboxWith(code: string): Sandbox {
  const sb = new Sandbox();
  live.push(sb);
  sb.evalSync(`${code}\n;undefined`);
  return sb;
}

async function codeOf(promise: Promise<unknown>): Promise<string> {
  try {
    await promise;
    return "ok";
  } catch (err) {
    if (!(err instanceof SandboxError)) throw err;
    return err.code;
  }
}

const STATE = `var rows = Array.from({ length: 50 }, (_, i) => ({ id: i, name: "row-" + i })); function total() { return rows.length; } var big = 2n ** 80n`;

describe("snapshotBody", () => {
  it("is equal for snapshots of one state signed for different turns and threads, and differs when the state changes", () => {
    const sb = sandboxWith(STATE);
    const a = sb.snapshot({ signing: { key: KEY, threadId: "t1", turn: 1 } });
    const b = sb.snapshot({ signing: { key: "other-key-0123456789", threadId: "t2", turn: 9 } });
    expect(Buffer.compare(a, b)).not.toBe(0);
    expect(Buffer.compare(snapshotBody(a), snapshotBody(b))).toBe(0);
    sb.evalSync("rows[3].name = 'changed'");
    expect(Buffer.compare(snapshotBody(a), snapshotBody(sb.snapshot()))).not.toBe(0);
  });

  it("refuses bytes that are not a snapshot with INVALID_SNAPSHOT", () => {
    expect(() => snapshotBody(new Uint8Array(100))).toThrow(
      expect.objectContaining({ code: "INVALID_SNAPSHOT" }) as Error,
    );
  });
});

describe("resealSnapshot", () => {
  it("signs an unsigned snapshot for a thread and turn; the result restores with that signing only", async () => {
    const plain = sandboxWith(STATE).snapshot();
    const signing = { key: KEY, threadId: "thread-a", turn: 7 };
    const sealed = await resealSnapshot(plain, { maxSnapshotBytes: MAX, signing });
    expect(inspectSnapshot(sealed)).toMatchObject({ signed: true, turn: 7, compressed: false });
    const { sandbox } = Sandbox.restore(sealed, { signing });
    live.push(sandbox);
    expect(sandbox.evalSync("total() + ':' + rows[49].name + ':' + String(big)")).toBe(`50:row-49:${2n ** 80n}`);
    expect(
      await codeOf(
        Promise.resolve().then(() => Sandbox.restore(sealed, { signing: { ...signing, turn: 8 } }).sandbox.dispose()),
      ),
    ).toBe("INVALID_SNAPSHOT");
    expect(
      await codeOf(
        Promise.resolve().then(() =>
          Sandbox.restore(sealed, { signing: { ...signing, threadId: "thread-b" } }).sandbox.dispose(),
        ),
      ),
    ).toBe("INVALID_SNAPSHOT");
  });

  it("deflates and inflates the body on request, the state unchanged either way", async () => {
    const plain = sandboxWith(STATE).snapshot();
    const deflated = await resealSnapshot(plain, { maxSnapshotBytes: MAX, compress: true });
    expect(inspectSnapshot(deflated).compressed).toBe(true);
    expect(deflated.length).toBeLessThan(plain.length);
    const inflated = await resealSnapshot(deflated, { maxSnapshotBytes: MAX });
    expect(Buffer.compare(snapshotBody(inflated), snapshotBody(plain))).toBe(0);
    const { sandbox } = Sandbox.restore(deflated);
    live.push(sandbox);
    expect(sandbox.evalSync("total()")).toBe(50);
  });

  it("moves a signed snapshot to another turn only when given the signing it carries", async () => {
    const from = { key: KEY, threadId: "thread-a", turn: 3 };
    const signed = sandboxWith(STATE).snapshot({ signing: from });
    const to = { ...from, turn: 4 };
    expect(inspectSnapshot(await resealSnapshot(signed, { maxSnapshotBytes: MAX, from, signing: to })).turn).toBe(4);
    expect(await codeOf(resealSnapshot(signed, { maxSnapshotBytes: MAX, signing: to }))).toBe("INVALID_SNAPSHOT");
    expect(
      await codeOf(
        resealSnapshot(signed, { maxSnapshotBytes: MAX, from: { ...from, key: "wrong-key-0123456789" }, signing: to }),
      ),
    ).toBe("INVALID_SNAPSHOT");
  });

  it("never signs an altered snapshot: one flipped body byte is refused before sealing", async () => {
    const plain = sandboxWith(STATE).snapshot();
    const altered = Uint8Array.from(plain);
    altered[40] = altered[40]! ^ 1;
    expect(
      await codeOf(resealSnapshot(altered, { maxSnapshotBytes: MAX, signing: { key: KEY, threadId: "t", turn: 1 } })),
    ).toBe("INVALID_SNAPSHOT");
  });

  it("refuses a snapshot over maxSnapshotBytes, and a body that would inflate past it", async () => {
    const sb = sandboxWith(`var text = "a".repeat(200000)`);
    const deflated = sb.snapshot({ compress: true });
    expect(deflated.length).toBeLessThan(20000);
    expect(await codeOf(resealSnapshot(deflated, { maxSnapshotBytes: deflated.length - 1 }))).toBe("INVALID_SNAPSHOT");
    expect(await codeOf(resealSnapshot(deflated, { maxSnapshotBytes: 50000 }))).toBe("INVALID_SNAPSHOT");
    expect(await codeOf(resealSnapshot(deflated, { maxSnapshotBytes: 50000, compress: true }))).toBe("ok");
  });
});
