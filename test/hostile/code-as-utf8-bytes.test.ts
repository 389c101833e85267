// Hazard: code handed to the sandbox as UTF-8 bytes (the eval tool passes what its transform worker
// encoded, so a megabyte of code is neither decoded from the worker's message nor converted to
// UTF-8 on the Node main thread). The bytes reach the parser as they are: a small Buffer is a
// window on Node's shared pool, whose neighbouring bytes must not become code; bytes that are not
// UTF-8 (a stray byte, a sequence cut short, a NUL) must be the guest's SyntaxError, never a crash
// or a read past the end.
import { describe, expect, it } from "vitest";
import { sandbox } from "./harness.js";

const bytes = (...parts: Array<string | number[]>): Uint8Array =>
  Buffer.concat(parts.map((part) => (typeof part === "string" ? Buffer.from(part) : Buffer.from(part))));

describe("code given as UTF-8 bytes", () => {
  it("runs exactly a pooled Buffer's own bytes, not its neighbours in the pool", async () => {
    const before = Buffer.from("throw 'before';");
    const code = Buffer.from("6 * 7");
    const after = Buffer.from(";throw 'after'");
    expect(code.buffer.byteLength).toBeGreaterThan(code.byteLength); // a window on the pool
    const sb = sandbox();
    expect(await sb.eval(code)).toBe(42);
    expect(sb.evalSync(code)).toBe(42);
    expect([before.length, after.length]).toEqual([15, 14]);
  });

  it("runs non-ASCII text the same as the string it encodes", async () => {
    const source = `"héllo \u{1F600} – ok".length`;
    const sb = sandbox();
    expect(await sb.eval(new TextEncoder().encode(source))).toBe(await sb.eval(source));
  });

  for (const [what, code] of [
    ["a stray continuation byte", bytes("1 + ", [0x80])],
    ["a byte that starts no UTF-8 sequence", bytes("'", [0xff], "'")],
    ["a sequence cut short at the end", bytes("'", [0xe2, 0x82])],
    ["an overlong encoding of a quote", bytes("'", [0xc0, 0xa7], "'")],
    ["a NUL inside an expression", bytes("1 +", [0], " 1")],
  ] as const) {
    it(`fails ${what} as the guest's SyntaxError, and the sandbox keeps working`, async () => {
      const sb = sandbox();
      const report = await sb.run(code);
      expect(report.ok).toBe(false);
      expect(report.ok ? undefined : report.error.guest?.name).toBe("SyntaxError");
      expect(await sb.eval("1 + 1")).toBe(2);
    });
  }

  it("refuses a value that is neither a string nor bytes with INVALID_ARGUMENT", async () => {
    const sb = sandbox();
    await expect(sb.eval([1, 2] as unknown as string)).rejects.toMatchObject({ code: "INVALID_ARGUMENT" });
    expect(() => sb.evalSync(new ArrayBuffer(4) as unknown as string)).toThrow(/string or a Uint8Array/);
  });
});
