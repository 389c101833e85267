import { createHash } from "node:crypto";
import { deflateRawSync } from "node:zlib";
import { afterEach, describe, expect, it } from "vitest";
import { Sandbox, SandboxError } from "../../src/index.js";
import { inspectSnapshot, SNAPSHOT_OVERHEAD_BYTES } from "../../src/snapshot.js";

const live: Sandbox[] = [];
afterEach(() => {
  for (const sb of live.splice(0)) sb.dispose();
});

const KEY = "k".repeat(32);
const signing = { key: KEY, threadId: "thread-1", turn: 4 };

function sandboxWith(code: string): Sandbox {
  const sb = new Sandbox();
  live.push(sb);
  sb.evalSync(`${code}\n;undefined`);
  return sb;
}

/** Restores, and returns the error code, or "ok". Restored sandboxes are disposed. */
function attempt(bytes: Uint8Array, options?: Parameters<typeof Sandbox.restore>[1]): string {
  try {
    Sandbox.restore(bytes, options).sandbox.dispose();
    return "ok";
  } catch (err) {
    if (!(err instanceof SandboxError)) throw err;
    return err.code;
  }
}

/** A snapshot around `body` with a valid SHA-256, as src/snapshot.ts lays it out. */
function sealed(body: Uint8Array, flags = 0): Uint8Array {
  const out = Buffer.alloc(32 + body.length + 32);
  out.write("QJSNSNAP", 0, "latin1");
  out.writeUInt16LE(1, 8);
  out.writeUInt16LE(flags, 10);
  out.writeUInt32LE(body.length, 12);
  out.write("0.17.0", 24, "latin1");
  out.set(body, 32);
  createHash("sha256")
    .update(out.subarray(0, 32 + body.length))
    .digest()
    .copy(out, 32 + body.length);
  return out;
}

function bodyOf(bytes: Uint8Array): Uint8Array {
  return bytes.subarray(32, bytes.length - 32);
}

const SMALL_STATE = "var a = { n: 1, s: 'x' }; a.self = a; let list = [1, a]; function f(x) { return x + 1 }";

describe("a signed snapshot is refused when anything changed", () => {
  const bytes = sandboxWith(SMALL_STATE).snapshot({ signing });

  it("restores untouched with the same key, thread and turn", () => {
    const { sandbox, notRestored } = Sandbox.restore(bytes, { signing });
    live.push(sandbox);
    expect(notRestored).toEqual([]);
    expect(sandbox.evalSync("a.self === a && list[1] === a && f(1)")).toBe(2);
    expect(inspectSnapshot(bytes)).toEqual({
      formatVersion: 2,
      signed: true,
      compressed: false,
      turn: 4,
      engineVersion: "0.17.0",
      bodyBytes: bytes.length - SNAPSHOT_OVERHEAD_BYTES,
    });
  });

  it("refuses it truncated at every length", () => {
    for (let length = 0; length < bytes.length; length++) {
      expect([length, attempt(bytes.subarray(0, length), { signing })]).toEqual([length, "INVALID_SNAPSHOT"]);
    }
    expect(attempt(Buffer.concat([bytes, Buffer.from([0])]), { signing })).toBe("INVALID_SNAPSHOT");
  }, 300_000);

  it("refuses it with any single bit flipped", () => {
    for (let i = 0; i < bytes.length; i++) {
      for (let bit = 0; bit < 8; bit++) {
        const copy = Uint8Array.from(bytes);
        copy[i]! ^= 1 << bit;
        expect([i, bit, attempt(copy, { signing })]).toEqual([i, bit, "INVALID_SNAPSHOT"]);
      }
    }
  }, 300_000);

  it("refuses another thread's, another turn's, another key's, and an unsigned snapshot", () => {
    expect(attempt(bytes, { signing: { ...signing, threadId: "thread-2" } })).toBe("INVALID_SNAPSHOT");
    expect(attempt(bytes, { signing: { ...signing, turn: 5 } })).toBe("INVALID_SNAPSHOT");
    expect(attempt(bytes, { signing: { ...signing, turn: 3 } })).toBe("INVALID_SNAPSHOT");
    expect(attempt(bytes, { signing: { ...signing, key: "z".repeat(32) } })).toBe("INVALID_SNAPSHOT");
    expect(attempt(bytes)).toBe("INVALID_SNAPSHOT");
    const older = sandboxWith(SMALL_STATE).snapshot({ signing: { ...signing, turn: 3 } });
    expect(attempt(older, { signing })).toBe("INVALID_SNAPSHOT");
    const unsigned = sandboxWith(SMALL_STATE).snapshot();
    expect(attempt(unsigned, { signing })).toBe("INVALID_SNAPSHOT");
    expect(attempt(unsigned)).toBe("ok");
  });

  it("refuses a short key, a non-integer turn and input that is not bytes", () => {
    expect(attempt(bytes, { signing: { ...signing, key: "short" } })).toBe("INVALID_ARGUMENT");
    expect(attempt(bytes, { signing: { ...signing, turn: 1.5 } })).toBe("INVALID_ARGUMENT");
    expect(attempt("QJSNSNAP" as never)).toBe("INVALID_SNAPSHOT");
  });
});

describe("an unsigned snapshot carries a checksum", () => {
  it("refuses any single flipped byte", () => {
    const bytes = sandboxWith(SMALL_STATE).snapshot();
    for (let i = 0; i < bytes.length; i++) {
      const copy = Uint8Array.from(bytes);
      copy[i]! ^= 0xff;
      expect([i, attempt(copy)]).toEqual([i, "INVALID_SNAPSHOT"]);
    }
  }, 300_000);
});

describe("the body reader is hardened against data that passes the checksum", () => {
  const rich = sandboxWith(`
    var a = { n: 1, s: "x\\u1234", big: 12n, d: new Date(0), r: /x/g, e: new Error("m") }; a.self = a;
    let list = [1, , a, new Map([[1, a]]), new Set([2])]; const buf = new Uint16Array([1, 2]);
    class K { m() { return 1 } } var k = new K(); function f(x) { return x + 1 } var p = Promise.resolve();
  `).snapshot();
  const body = bodyOf(rich);

  it("every truncation of the body is refused", () => {
    for (let length = 0; length < body.length; length++) {
      expect([length, attempt(sealed(body.subarray(0, length)))]).toEqual([length, "INVALID_SNAPSHOT"]);
    }
  }, 300_000);

  it("every single-byte change either restores or is refused with a typed error, and never crashes", () => {
    const codes = new Map<string, number>();
    for (let i = 0; i < body.length; i++) {
      for (const mask of [0x01, 0x80, 0xff]) {
        const copy = Uint8Array.from(body);
        copy[i]! ^= mask;
        const code = attempt(sealed(copy));
        codes.set(code, (codes.get(code) ?? 0) + 1);
      }
    }
    expect([...codes.keys()].every((c) => ["ok", "INVALID_SNAPSHOT", "TIMEOUT", "OUT_OF_MEMORY"].includes(c))).toBe(
      true,
    );
    expect(codes.get("INVALID_SNAPSHOT")).toBeGreaterThan(body.length);
  }, 300_000);

  it("huge counts and lengths are refused before anything is allocated", () => {
    const entries = Buffer.alloc(4);
    entries.writeUInt32LE(0xffffffff);
    expect(attempt(sealed(entries))).toBe("INVALID_SNAPSHOT");
    // One global whose value is an array claiming 4 billion entries.
    const hugeArray = Buffer.from([
      1, 0, 0, 0, 0, 0, 0x14, 1, 0, 0, 0, 0x61, 0x08, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
    ]);
    expect(attempt(sealed(hugeArray))).toBe("INVALID_SNAPSHOT");
    // A function whose source length runs past the end.
    const longSource = Buffer.from([1, 0, 0, 0, 0, 0, 0x14, 1, 0, 0, 0, 0x61, 0x15, 0xff, 0xff, 0xff, 0x7f, 0x41]);
    expect(attempt(sealed(longSource))).toBe("INVALID_SNAPSHOT");
  });

  it("a placeholder outside a property, a forward reference and a duplicate global are refused", () => {
    const header = (n: number): number[] => [n, 0, 0, 0];
    const entry = (name: string): number[] => [0, 7, 0x14, name.length, 0, 0, 0, ...Buffer.from(name, "latin1")];
    const placeholderInSet = [0x0d, 1, 0, 0, 0, 0x18, 0x14, 1, 0, 0, 0, 0x78, 0x14, 1, 0, 0, 0, 0x78];
    expect(attempt(sealed(Uint8Array.from([...header(1), ...entry("a"), ...placeholderInSet])))).toBe(
      "INVALID_SNAPSHOT",
    );
    const forward = [0x11, 5, 0, 0, 0];
    expect(attempt(sealed(Uint8Array.from([...header(1), ...entry("a"), ...forward])))).toBe("INVALID_SNAPSHOT");
    expect(attempt(sealed(Uint8Array.from([...header(2), ...entry("a"), ...entry("a"), 0x00, 0x00])))).toBe(
      "INVALID_SNAPSHOT",
    );
    expect(attempt(sealed(Uint8Array.from([...header(1), ...entry("a"), 0x01])))).toBe("ok");
  });
});

describe("maxSnapshotBytes", () => {
  it("a snapshot over the cap is not produced", () => {
    const sb = sandboxWith("var text = 'x'.repeat(10000)");
    let err: unknown;
    try {
      sb.snapshot({ maxSnapshotBytes: 5000 });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(SandboxError);
    expect((err as SandboxError).code).toBe("INVALID_SNAPSHOT");
    expect((err as SandboxError).message).toContain("maxSnapshotBytes (5000)");
    expect(sb.snapshot({ maxSnapshotBytes: 20000 }).length).toBeLessThan(20000);
  });

  it("a snapshot over the reader's cap is refused before it is read; the default cap is memoryLimitBytes", () => {
    const bytes = sandboxWith("var text = 'x'.repeat(10000)").snapshot();
    expect(attempt(bytes, { maxSnapshotBytes: 5000 })).toBe("INVALID_SNAPSHOT");
    expect(attempt(bytes, { maxSnapshotBytes: bytes.length })).toBe("ok");
    const big = sandboxWith("var text = 'x'.repeat(1.5 * 1024 * 1024)").snapshot();
    expect(attempt(big, { memoryLimitBytes: 1024 * 1024 })).toBe("INVALID_SNAPSHOT");
  });

  it("a restore that runs out of memory fails with OUT_OF_MEMORY", () => {
    const bytes = sandboxWith("var rows = Array.from({ length: 20000 }, (_, i) => ({ i, s: 'x' + i }))").snapshot();
    expect(attempt(bytes, { memoryLimitBytes: 1024 * 1024 })).toBe("OUT_OF_MEMORY");
    expect(attempt(bytes, { memoryLimitBytes: 64 * 1024 * 1024 })).toBe("ok");
  });
});

describe("nesting", () => {
  it("state nested 500 deep round-trips; deeper than the 512-level cap is refused with INVALID_SNAPSHOT", () => {
    const sb = sandboxWith(
      "var deep = []; for (let i = 0; i < 500; i++) deep = [deep]; var m = new Map(); for (let i = 0; i < 40; i++) m = new Map([[1, m]])",
    );
    const { sandbox } = Sandbox.restore(sb.snapshot());
    live.push(sandbox);
    expect(sandbox.evalSync("let n = 0, d = deep; while (d.length) { d = d[0]; n++ } n")).toBe(500);
    sb.evalSync("var deeper = []; for (let i = 0; i < 600; i++) deeper = [deeper]; undefined");
    let code = "none";
    try {
      sb.snapshot();
    } catch (err) {
      code = (err as SandboxError).code;
    }
    expect(code).toBe("INVALID_SNAPSHOT");
  });
});

describe("compressed snapshots", () => {
  it("a deflated snapshot restores the same state, smaller, and is still refused when altered", () => {
    const sb = sandboxWith(
      "var rows = Array.from({ length: 500 }, (_, i) => ({ id: i, name: 'row ' + i, tags: ['a', 'b'] })); var box = { rows }; box.self = box",
    );
    const plain = sb.snapshot({ signing });
    const small = sb.snapshot({ signing, compress: true });
    expect(small.length * 3).toBeLessThan(plain.length);
    expect(inspectSnapshot(small).compressed).toBe(true);
    const { sandbox } = Sandbox.restore(small, { signing });
    live.push(sandbox);
    expect(sandbox.evalSync("[rows.length, rows[499].name, box.self === box && box.rows === rows]")).toEqual([
      500,
      "row 499",
      true,
    ]);
    for (const i of [0, 10, 20, 40, small.length - 40, small.length - 1]) {
      const copy = Uint8Array.from(small);
      copy[i]! ^= 0x04;
      expect([i, attempt(copy, { signing })]).toEqual([i, "INVALID_SNAPSHOT"]);
    }
  });

  it("a body that inflates past maxSnapshotBytes is refused (no decompression bomb)", () => {
    const bomb = sealed(deflateRawSync(Buffer.alloc(8 * 1024 * 1024)), 2);
    expect(bomb.length).toBeLessThan(64 * 1024);
    expect(attempt(bomb, { maxSnapshotBytes: 1024 * 1024 })).toBe("INVALID_SNAPSHOT");
    expect(attempt(sealed(Buffer.from("not deflate data"), 2))).toBe("INVALID_SNAPSHOT");
  });
});

describe("nesting that exhausts the sandbox's stack", () => {
  it("is refused with INVALID_SNAPSHOT, not reported as out of memory", () => {
    const sb = new Sandbox({ maxStackSizeBytes: 64 * 1024 });
    live.push(sb);
    sb.evalSync("var m = new Map(); for (let i = 0; i < 100; i++) m = new Map([[1, m]]); undefined");
    let err: SandboxError | undefined;
    try {
      sb.snapshot();
    } catch (e) {
      err = e as SandboxError;
    }
    expect(err?.code).toBe("INVALID_SNAPSHOT");
    expect(err?.message).toMatch(/nested too deeply/);
  });

  it("restoring into a sandbox with a smaller stack is refused the same way", () => {
    // Sanitizer builds take several times the stack per level: keep well inside 4 MiB. 400 levels,
    // not fewer: the reader takes under 300 bytes of stack per level of Maps, so 64 KiB holds ~200.
    const deep = new Sandbox({ maxStackSizeBytes: 4 * 1024 * 1024 });
    live.push(deep);
    deep.evalSync("var m = new Map(); for (let i = 0; i < 400; i++) m = new Map([[1, m]]); undefined");
    const bytes = deep.snapshot();
    expect(attempt(bytes, { maxStackSizeBytes: 64 * 1024 })).toBe("INVALID_SNAPSHOT");
    expect(attempt(bytes, { maxStackSizeBytes: 4 * 1024 * 1024 })).toBe("ok");
  });
});
