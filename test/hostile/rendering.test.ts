/**
 * Values copied out of a sandbox are rendered for people and models on the Node main thread. A
 * few KB of guest data can describe terabytes of `util.inspect` output (shared sub-trees), hundreds
 * of thousands of keys, or a BigInt of millions of digits: rendering must stop at its budget.
 */
import { inspect } from "node:util";
import { describe, expect, it } from "vitest";
import { GuestOpaque } from "../../src/index.js";
import { bigintText, formatConsoleArgs, renderValue, RENDER_OPTIONS } from "../../src/render.js";
import { sandbox } from "./harness.js";

function sharedArrays(levels: number): unknown[] {
  let x: unknown[] = [1];
  for (let d = 0; d < levels; d++) x = new Array(200).fill(x);
  return x;
}

describe("renderValue", () => {
  it.each<[string, unknown]>([
    ["nested plain data", { a: [1, 2, { b: "c" }], d: new Map([[1, new Set(["x"])]]), e: -0, f: 10n, g: undefined }],
    [
      "a cycle",
      (() => {
        const o: Record<string, unknown> = { name: "root" };
        o["self"] = o;
        return o;
      })(),
    ],
    ["an array with holes", [1, , 3]],
    ["a null-prototype object", Object.assign(Object.create(null) as object, { a: 1 })],
    ["an array over maxArrayLength", Array.from({ length: 250 }, (_, i) => i)],
    ["a string over maxStringLength", ["s".repeat(12_000)]],
    ["an opaque guest function", { f: new GuestOpaque("function", "score") }],
    ["nesting past the depth limit", { a: { b: { c: { d: { e: { f: { g: { h: 1 } } } } } } }, arr: [[[[[[[[1]]]]]]]] }],
  ])("renders %s exactly as util.inspect does when it fits the budget", (_what, value) => {
    expect(renderValue(value, 1_000_000)).toBe(inspect(value, RENDER_OPTIONS));
  });

  it("stops a shared-array tree that util.inspect would print as 200^7 items at the budget", () => {
    const text = renderValue(sharedArrays(7), 4000);
    expect(text.length).toBeLessThan(4 * 4000);
    expect(text).toMatch(/\.\.\. \d+ more items/);
  });

  it("shows the first keys of a 300,000-key object and counts the rest", () => {
    const wide: Record<string, number> = {};
    for (let i = 0; i < 300_000; i++) wide[`k${i}`] = i;
    const text = renderValue(wide, 4000);
    expect(text.length).toBeLessThan(4 * 4000);
    expect(text).toMatch(/^\{\n {2}k0: 0,\n {2}k1: 1,/);
    const more = Number(/'\.\.\.': (\d+) more keys/.exec(text)?.[1]);
    expect(more).toBeGreaterThan(290_000);
    expect(text.match(/k\d+:/g)).toHaveLength(300_000 - more);
  });

  it.each<[string, Map<number, number> | Set<number>, RegExp]>([
    ["Set", new Set(Array.from({ length: 1000 }, (_, i) => i)), /\.\.\. (\d+) more items/],
    ["Map", new Map(Array.from({ length: 1000 }, (_, i) => [i, i])), /\.\.\. => (\d+) more entries/],
  ])("counts every entry of a %s over maxArrayLength that it does not show", (_kind, collection, marker) => {
    const text = renderValue(collection, 1_000_000);
    const shown = text.match(/^ {2}\d+/gm)?.length ?? 0;
    expect(shown).toBeGreaterThan(100);
    expect(shown + Number(marker.exec(text)?.[1])).toBe(1000);
    expect(text).not.toMatch(/\.\.\. 1 more item\b/);
  });

  it("cuts a long string inside a value and says how much is left", () => {
    const text = renderValue({ s: "x".repeat(1_000_000) }, 1000);
    expect(text.length).toBeLessThan(1200);
    expect(text).toMatch(/'x+'\.\.\. \d+ more characters/);
  });

  it("walks no deeper than the depth limit, whatever the nesting", () => {
    let deep: unknown = 1;
    for (let i = 0; i < 100_000; i++) deep = [deep];
    expect(renderValue(deep, 4000)).toBe(inspect([[[[[[[[1]]]]]]]], RENDER_OPTIONS));
  });

  it("counts a huge sparse array instead of visiting its holes", () => {
    const sparse: unknown[] = [];
    sparse[2 ** 32 - 2] = 1;
    expect(renderValue(sparse, 4000)).toMatch(/^\[ <200 empty items>, \.\.\. 4294967095 more items \]$/);
  });
});

describe("bigintText", () => {
  it("is exact for ordinary BigInts", () => {
    expect(bigintText(10n)).toBe("10n");
    expect(bigintText(-(2n ** 1000n))).toBe(`${-(2n ** 1000n)}n`);
  });

  it("shows the first 10 and last 12 digits and the digit count of a huge one", () => {
    const big = 2n ** 65536n;
    const digits = big.toString();
    expect(bigintText(big)).toBe(`${digits.slice(0, 10)}...${digits.slice(-12)}n (19,729 digits)`);
    expect(bigintText(-big)).toBe(`-${digits.slice(0, 10)}...${digits.slice(-12)}n (19,729 digits)`);
  });
});

describe("console output", () => {
  it("formats like console.log, %s included", () => {
    expect(formatConsoleArgs(["%s has %d", "box", 3, { a: 1 }], 1000)).toBe("box has 3 { a: 1 }");
  });

  it("console.log of a shared-array tree stays within maxConsoleBytes", async () => {
    const sb = sandbox({ maxConsoleBytes: 64 * 1024 });
    const report = await sb.run("let x = [1]; for (let d = 0; d < 7; d++) x = Array(200).fill(x); console.log(x); 1");
    expect(report.ok).toBe(true);
    const text = report.console.map((entry) => entry.text).join("\n");
    expect(Buffer.byteLength(text)).toBeLessThanOrEqual(64 * 1024);
    expect(report.console.length + Number(report.consoleTruncated)).toBeGreaterThan(0);
  });

  it("a thrown object of shared arrays becomes a bounded error message", async () => {
    const sb = sandbox();
    const report = await sb.run("let x = [1]; for (let d = 0; d < 7; d++) x = Array(200).fill(x); throw x");
    expect(report.ok).toBe(false);
    if (!report.ok) expect(report.error.message.length).toBeLessThan(4 * 16_384);
  });
});
