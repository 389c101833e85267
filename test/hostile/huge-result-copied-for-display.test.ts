// Hazard: a guest result of 300,000 keys becomes a 300,000-key object on the Node main thread,
// though the middleware only shows it within maxResultChars. Decoding is sliced, but V8 grows an
// object of that size by copying its whole hash table at once (one step near 174,000 keys), and
// collects it in long pauses: the event loop's longest gap stayed at 24-28 ms. A run with
// `displayChars` copies such an object with only the keys a rendering within that budget can show,
// counting the rest; the Sandbox API without it still returns the exact copy.
//
// The outcome asserted is the size of what the host holds, not a time: the display copy has at most
// keysShownWithin(displayChars) keys, and renders to the same text as the exact copy.
import { afterEach, describe, expect, it, vi } from "vitest";
import { Sandbox } from "../../src/index.js";
import { createCodeInterpreterMiddleware } from "../../src/langchain/index.js";
import { keysShownWithin } from "../../src/marshal.js";
import { renderValue } from "../../src/render.js";
import { sandbox } from "./harness.js";

const KEYS = 300_000;
// Block-scoped, so one sandbox can run it again.
const BUILD_BIG = `const big = {}; for (let i = 0; i < ${KEYS}; i++) big['k' + i] = i;`;
const inBlock = (code: string): string => `(() => { ${code} })()`;
const CHARS = 2_000;

afterEach(() => {
  vi.restoreAllMocks();
});

describe("a result copied for display", () => {
  it("holds only the keys a rendering within displayChars shows, and renders as the exact copy does", async () => {
    const sb = sandbox();
    const code = inBlock(`${BUILD_BIG} return big;`);
    const exact = (await sb.eval(code)) as Record<string, number>;
    const report = await sb.run(code, { displayChars: CHARS });
    expect(report.ok).toBe(true);
    const shown = (report as { value: Record<string, number> }).value;
    expect(Object.keys(exact)).toHaveLength(KEYS);
    expect(Object.keys(shown).length).toBeLessThanOrEqual(keysShownWithin(CHARS));
    expect(renderValue(shown, CHARS)).toBe(renderValue(exact, CHARS));
    expect(renderValue(shown, CHARS)).toMatch(/'\.\.\.': 29\d{4} more keys/);
  });

  it("keeps values only the dropped keys led to for the references that come after them", async () => {
    const sb = sandbox();
    // `shared` is first met under a dropped key, then referenced again; `big.self` is a cycle.
    const code = inBlock(`${BUILD_BIG} const shared = { x: [1, 2] }; big.late = shared; big.self = big; return [big, shared, { again: shared }];`);
    const exact = await sb.eval(code);
    const report = await sb.run(code, { displayChars: CHARS });
    expect(report.ok).toBe(true);
    const shown = (report as { value: unknown[] }).value;
    expect(shown[1]).toEqual({ x: [1, 2] });
    expect((shown[2] as { again: unknown }).again).toBe(shown[1]);
    expect(renderValue(shown, CHARS)).toBe(renderValue(exact, CHARS));
  });

  it("renders a thrown 300,000-key object to the same error message, within its own larger budget", async () => {
    const sb = sandbox();
    const code = inBlock(`${BUILD_BIG} throw big;`);
    const exact = await sb.run(code);
    const shown = await sb.run(code, { displayChars: 100 });
    expect(exact.ok || shown.ok).toBe(false);
    expect(!shown.ok && shown.error.message).toBe(!exact.ok && exact.error.message);
  });

  it("is the same value as the exact copy for objects under 1,024 keys, in run and runSync", async () => {
    const sb = sandbox();
    const code = inBlock("const o = {}; for (let i = 0; i < 1000; i++) o['k' + i] = { i }; return o;");
    expect((await sb.run(code, { displayChars: 10 }) as { value: unknown }).value).toEqual(sb.evalSync(code));
    expect((sb.runSync(code, { displayChars: 10 }) as { value: unknown }).value).toEqual(sb.evalSync(code));
  });

  it("refuses a displayChars that is not a non-negative integer", async () => {
    const sb = sandbox();
    for (const displayChars of [-1, 1.5, "10"]) {
      expect(() => sb.runSync("1", { displayChars: displayChars as number })).toThrow(/displayChars/);
    }
  });
});

describe("the middleware's eval tool", () => {
  it("never makes the full 300,000-key object on the host, and shows its head and the count of the rest", async () => {
    const maxResultChars = 4_000;
    const heldKeys: number[] = [];
    const run = Sandbox.prototype.run;
    vi.spyOn(Sandbox.prototype, "run").mockImplementation(async function (this: Sandbox, ...args: Parameters<Sandbox["run"]>) {
      const report = await run.apply(this, args);
      if (report.ok && typeof report.value === "object" && report.value !== null) heldKeys.push(Object.keys(report.value).length);
      return report;
    });
    const middleware = createCodeInterpreterMiddleware({ maxResultChars });
    try {
      const evalTool = middleware.tools[0] as unknown as { invoke(input: { code: string }, config: unknown): Promise<unknown> };
      const output = await evalTool.invoke({ code: `${BUILD_BIG} big` }, { configurable: { thread_id: "huge-result" } });
      const text = typeof output === "string" ? output : String((output as { content: unknown }).content);
      expect(heldKeys).toHaveLength(1);
      expect(heldKeys[0]).toBeLessThanOrEqual(keysShownWithin(maxResultChars));
      expect(text).toMatch(/k0: 0,\s+k1: 1,/);
      expect(text).toMatch(/\d+ more keys/);
    } finally {
      middleware.dispose();
    }
  });
});
