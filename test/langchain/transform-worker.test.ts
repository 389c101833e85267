/**
 * Large model code is parsed on a worker thread, never on the shared main thread. The worker runs
 * the compiled module, so this suite uses dist/ (`npm run build:ts`; `npm test` does it first).
 */
import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import { describe, expect, it } from "vitest";

const dist = fileURLToPath(new URL("../../dist/langchain/", import.meta.url));
if (!existsSync(`${dist}transform-worker.js`))
  throw new Error("dist/ is missing: run `npm run build:ts` (npm test does)");
const { transformOffThread, INLINE_TRANSFORM_CHARS } = (await import(
  `${dist}transform-off-thread.js`
)) as typeof import("../../src/langchain/transform-off-thread.js");
const { transformCode } = (await import(`${dist}transform.js`)) as typeof import("../../src/langchain/transform.js");

const lines = (count: number, line: (i: number) => string): string =>
  Array.from({ length: count }, (_, i) => line(i)).join("\n");

describe("transformOffThread", () => {
  it("gives large TypeScript the same result as the inline transform, line map included", async () => {
    const source = `enum Color { Red, Green }\n${lines(500, (i) => `const v${i}: number = ${i};`)}\nthrow new Error(String(Color.Green))`;
    expect(source.length).toBeGreaterThan(INLINE_TRANSFORM_CHARS);
    const off = await transformOffThread(source, 30_000);
    const inline = transformCode(source);
    expect(off.code).toBeInstanceOf(Uint8Array);
    expect(new TextDecoder().decode(off.code as Uint8Array)).toBe(inline.code);
    expect(off.stripping).toBe("transpiled");
    expect(inline.lineMap).toBeDefined();
    expect(off.lineMap?.(503)).toBe(inline.lineMap?.(503));
  });

  it("replies with only what the eval runs: no per-declaration strings for the main thread to decode, the script's UTF-8 bytes and the line table transferred", async () => {
    // A megabyte of declarations made 35,000 names and a 35,000-number array the main thread decoded per eval.
    const source = `enum Color { Red }\n${lines(5000, (i) => `const v${i}: number = ${i};`)}`;
    const worker = new Worker(new URL(`file://${dist}transform-worker.js`));
    try {
      const reply = await new Promise<{ id: number; result: Record<string, unknown> }>((resolve, reject) => {
        worker.once("message", resolve);
        worker.once("error", reject);
        worker.postMessage({ id: 7, source });
      });
      expect(reply.id).toBe(7);
      expect(Object.keys(reply.result).sort()).toEqual(["code", "language", "lineTable", "stripping"]);
      expect(reply.result["lineTable"]).toBeInstanceOf(Uint32Array);
      // A script of megabytes as a string cost the main thread decoding it and converting it to UTF-8.
      expect(reply.result["code"]).toBeInstanceOf(Uint8Array);
      expect(new TextDecoder().decode(reply.result["code"] as Uint8Array)).toContain("v4999 = 4999");
      expect((reply.result["lineTable"] as Uint32Array).length).toBeGreaterThan(5000);
    } finally {
      await worker.terminate();
    }
  });

  it("turns code nested too deeply for the parser into a SyntaxError result", async () => {
    const result = await transformOffThread(`${"[".repeat(60_000)}${"]".repeat(60_000)}`, 30_000);
    expect(result.syntaxError?.message).toMatch(/nested too deeply/);
  });

  it("replaces a stripper instance that code nested too deeply broke, so the next large TypeScript still transforms", async () => {
    // 3,000 nested `if`s (no nested brackets for the depth check to see) overflow swc's WebAssembly stack.
    const broken = await transformOffThread(`const a: boolean = true\n${"if (a) ".repeat(3000)}1`, 60_000);
    expect(broken.syntaxError?.message).toMatch(/nested too deeply/);
    const next = await transformOffThread(
      `enum Color { Red, Green }\n${lines(500, (i) => `const v${i}: number = ${i};`)}\nColor.Green`,
      60_000,
    );
    expect(next.syntaxError).toBeUndefined();
    expect(next.stripping).toBe("transpiled");
  });

  it("stops a transform over its time limit with a SyntaxError, and the next transform still works", async () => {
    const slow = `enum E { A }\n${lines(8000, (i) => `const s${i}: string = "${i}";`)}`;
    const stopped = await transformOffThread(slow, 1);
    expect(stopped.syntaxError?.message).toMatch(/took longer than 1 ms to parse/);
    const next = await transformOffThread(`${lines(1000, (i) => `var n${i} = ${i};`)}\nn999`, 30_000);
    expect(next.syntaxError).toBeUndefined();
    expect(next.language).toBe("javascript");
  });
});

describe("transformCodeLazily", () => {
  it("transforms JavaScript without loading the TypeScript stripper, and loads it for TypeScript", () => {
    // A fresh process, so that nothing else has loaded the stripper.
    const script = `
      import { createRequire } from "node:module";
      const cache = createRequire(import.meta.url).cache;
      const typescriptLoaded = () => Object.keys(cache).some((path) => path.includes("/node_modules/@swc/wasm-typescript/"));
      const { transformCodeLazily } = await import(${JSON.stringify(`${dist}transform-javascript.js`)});
      const js = await transformCodeLazily("const a = 1\\na");
      const afterJs = typescriptLoaded();
      const ts = await transformCodeLazily("const a: number = 1\\na");
      console.log(JSON.stringify([js.language, afterJs, ts.language, ts.stripping, typescriptLoaded()]));
    `;
    const printed = execFileSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
    expect(JSON.parse(printed)).toEqual(["javascript", false, "typescript", "erased", true]);
  });
});
