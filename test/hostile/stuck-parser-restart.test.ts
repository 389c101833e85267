// Hazard: model code that keeps the parser busy past the eval's time limit. The parser's worker is
// then replaced, and starting a worker holds the thread that starts it for milliseconds (15-40 ms
// on a loaded machine): the restart ran on the Node main thread, which serves every session. The
// main thread now starts one host worker, once; the host replaces a stuck parser on its own thread.
// The worker runs the compiled module, so this suite uses dist/ (`npm run build:ts`; `npm test` does it first).
import { createHook } from "node:async_hooks";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";

const dist = fileURLToPath(new URL("../../dist/langchain/", import.meta.url));
if (!existsSync(`${dist}transform-worker.js`))
  throw new Error("dist/ is missing: run `npm run build:ts` (npm test does)");
const { transformOffThread } = (await import(
  `${dist}transform-off-thread.js`
)) as typeof import("../../src/langchain/transform-off-thread.js");

const lines = (count: number, line: (i: number) => string): string =>
  Array.from({ length: count }, (_, i) => line(i)).join("\n");

describe("a parser stuck past its time limit", () => {
  it("is replaced without starting a worker on the main thread, and the next transform works", async () => {
    const javascript = `${lines(1000, (i) => `var n${i} = ${i};`)}\nn999`;
    expect((await transformOffThread(javascript, 60_000)).syntaxError).toBeUndefined(); // the worker is up
    let started = 0;
    const hook = createHook({
      init(_id, type) {
        if (type === "WORKER") started++;
      },
    }).enable();
    try {
      const stopped = await transformOffThread(
        `enum E { A }\n${lines(8000, (i) => `const s${i}: string = "${i}";`)}`,
        1,
      );
      expect(stopped.syntaxError?.message).toMatch(/took longer than 1 ms to parse/);
      const next = await transformOffThread(javascript, 60_000);
      expect(next.syntaxError).toBeUndefined();
      expect(next.language).toBe("javascript");
    } finally {
      hook.disable();
    }
    expect(started).toBe(0);
  });
});
