/**
 * Model code that overflows the TypeScript stripper. swc's parser (WebAssembly) recurses per
 * nesting level: about 2,000 levels of brackets, 4 KB, small enough to be transformed inline,
 * overflowed its stack into a broken instance ("memory access out of bounds"), and every later
 * TypeScript transform in the process failed the same way, every session's included. Each attack
 * must give its own eval a clear SyntaxError and leave the next ordinary TypeScript eval working.
 */
import { describe, expect, it } from "vitest";
import { transformCode } from "../../src/langchain/transform.js";
import { sandbox } from "./harness.js";

/** Ordinary TypeScript of both kinds (erased and compiled), transformed and run after an attack. */
async function ordinaryTypeScriptStillRuns(): Promise<void> {
  const erased = transformCode("const n: number = 20\nn + 1");
  expect(erased).toMatchObject({ language: "typescript", stripping: "erased" });
  expect(erased.syntaxError).toBeUndefined();
  const compiled = transformCode("enum Color { Red, Green }\nColor.Green + 1");
  expect(compiled).toMatchObject({ language: "typescript", stripping: "transpiled" });
  expect(compiled.syntaxError).toBeUndefined();
  const sb = sandbox();
  expect(await sb.eval(erased.code)).toBe(21);
  expect(await sb.eval(compiled.code)).toBe(2);
}

describe("TypeScript nested deeply enough to overflow the stripper", () => {
  it.each([2_000, 10_000])(
    "%i levels of brackets give a clear SyntaxError, and the next TypeScript eval still works",
    async (levels) => {
      const source = `const a: number[] = ${"[".repeat(levels)}${"]".repeat(levels)}`;
      const result = transformCode(source);
      expect(result.syntaxError?.message).toMatch(/nested too deeply/);
      await expect(sandbox().eval(result.code)).rejects.toThrow(/nested too deeply/);
      await ordinaryTypeScriptStillRuns();
    },
  );

  it("2,000 levels of mixed (, [ and { at inline size give a clear SyntaxError, and the next TypeScript eval still works", async () => {
    const source = `const f = (x: number) => ${"({a:[".repeat(700)}x${"]})".repeat(700)}`;
    expect(source.length).toBeLessThan(8_000);
    expect(transformCode(source).syntaxError?.message).toMatch(/nested too deeply/);
    await ordinaryTypeScriptStillRuns();
  });

  // No bracket is nested here, so the depth check lets these through: the stripper itself fails,
  // and its instance is replaced.
  it.each([
    ["a chain of 1,000 arrow functions", `const f: any = ${"() => ".repeat(1_000)}1`],
    ["2,000 nested if statements", `const a: boolean = true\n${"if (a) ".repeat(2_000)}1`],
  ])("%s gives a SyntaxError, and the next TypeScript eval still works", async (_name, source) => {
    const result = transformCode(source);
    expect(result.syntaxError?.message).toMatch(/nested too deeply/);
    await ordinaryTypeScriptStillRuns();
  });

  it("ten attacks in a row leave the stripper working", async () => {
    for (let i = 0; i < 10; i++) {
      expect(transformCode(`let x: any = ${"() => ".repeat(1_000)}1`).syntaxError).toBeDefined();
      expect(transformCode(`let y: number = 1\n${"if (y) ".repeat(2_000)}1`).syntaxError).toBeDefined();
    }
    await ordinaryTypeScriptStillRuns();
  }, 120_000);
});
