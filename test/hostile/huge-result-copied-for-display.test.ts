// Hazard: a guest result of 300,000 keys (or a Map, Set or array of 300,000 entries) reaching the
// Node main thread, though the middleware only shows it within maxResultChars. The host decoded
// all of it a slice at a time (~85 ms of main-thread CPU for 300,000 keys, and V8 grows a table of
// that size by copying it whole), and on a loaded 2-core machine a thread that busy is preempted:
// the event loop's longest gap reached 31 ms. A run with `displayChars` now has the engine copy,
// on its own thread, only the head that `renderValue(value, displayChars)` can show (about
// displayChars / 2 values and keys, depth first, nothing below the render depth); containers cut
// short carry their counts. The Sandbox API without it still returns the exact copy.
//
// The outcomes asserted are the size of what the host holds and the rendered text, never a time:
// the display copy holds at most displayChars / 4 + 1 keys (displayChars / 2 + 1 entries of a Map,
// Set or array), and renders to the same text as the exact copy, whatever the value's shape.
import { afterEach, describe, expect, it, vi } from "vitest";
import { Sandbox, type EvalReport } from "../../src/index.js";
import { createCodeInterpreterMiddleware } from "../../src/langchain/index.js";
import { renderValue } from "../../src/render.js";
import { sandbox } from "./harness.js";

const KEYS = 300_000;
// Block-scoped, so one sandbox can run it again.
const BUILD_BIG = `const big = {}; for (let i = 0; i < ${KEYS}; i++) big['k' + i] = i;`;
const inBlock = (code: string): string => `(() => { ${code} })()`;
const CHARS = 2_000;
/** Keys a display copy for `chars` may hold: each costs the renderer at least 4 characters (key and value). */
const keysWithin = (chars: number): number => chars / 4 + 1;

afterEach(() => {
  vi.restoreAllMocks();
});

/** The exact copy and the copy for display of `code`'s value, from one sandbox. */
async function bothCopies(
  code: string,
  chars: number,
  options?: ConstructorParameters<typeof Sandbox>[0],
): Promise<{ exact: unknown; shown: unknown }> {
  const sb = sandbox(options);
  const exact = await sb.eval(code);
  const report = await sb.run(code, { displayChars: chars });
  expect(report.ok).toBe(true);
  return { exact, shown: (report as { value: unknown }).value };
}

describe("a result copied for display", () => {
  it("holds only the keys a rendering within displayChars shows, and renders as the exact copy does", async () => {
    const { exact, shown } = await bothCopies(inBlock(`${BUILD_BIG} return big;`), CHARS);
    expect(Object.keys(exact as object)).toHaveLength(KEYS);
    expect(Object.keys(shown as object).length).toBeLessThanOrEqual(keysWithin(CHARS));
    expect(renderValue(shown, CHARS)).toBe(renderValue(exact, CHARS));
    expect(renderValue(shown, CHARS)).toMatch(/'\.\.\.': 29\d{4} more keys/);
  });

  for (const [kind, build, sizeOf] of [
    [
      "a Map",
      `const m = new Map(); for (let i = 0; i < ${KEYS}; i++) m.set('k' + i, { i }); return m;`,
      (v: unknown) => (v as Map<unknown, unknown>).size,
    ],
    [
      "a Set",
      `const s = new Set(); for (let i = 0; i < ${KEYS}; i++) s.add('k' + i); return s;`,
      (v: unknown) => (v as Set<unknown>).size,
    ],
    [
      "an array",
      `const a = []; for (let i = 0; i < ${KEYS}; i++) a.push(i); return a;`,
      (v: unknown) => Object.keys(v as unknown[]).length,
    ],
  ] as const) {
    it(`holds only the head of ${kind} of 300,000 entries, and renders as the exact copy does`, async () => {
      const { exact, shown } = await bothCopies(inBlock(build), CHARS, { memoryLimitBytes: 256 * 1024 * 1024 });
      expect(sizeOf(exact)).toBe(KEYS);
      expect(sizeOf(shown)).toBeLessThanOrEqual(CHARS / 2 + 1);
      expect(renderValue(shown, CHARS)).toBe(renderValue(exact, CHARS));
    });
  }

  it("counts a cut Map's entries without running a size getter the guest replaced", async () => {
    const sb = sandbox();
    sb.evalSync(
      "globalThis.calls = 0; Object.defineProperty(Map.prototype, 'size', { get() { calls++; return 1; } });",
    );
    const report = await sb.run(inBlock("const m = new Map(); for (let i = 0; i < 5000; i++) m.set(i, i); return m;"), {
      displayChars: 200,
    });
    expect(report.ok).toBe(true);
    expect(renderValue((report as { value: unknown }).value, 200)).toMatch(/49\d\d more entries/);
    expect(sb.evalSync("calls")).toBe(0);
  });

  it("renders shared values, cycles and values past the cut as the exact copy does", async () => {
    // `shared` comes after the cut inside `big`, then again in the array; `big.self` is a cycle.
    const code = inBlock(
      `const big = {}; for (let i = 0; i < 20000; i++) big['k' + i] = i; const shared = { x: [1, 2] }; big.late = shared; big.self = big; return [big, shared, { again: shared }];`,
    );
    for (const chars of [100, CHARS, 20_000]) {
      const { exact, shown } = await bothCopies(code, chars);
      expect(renderValue(shown, chars)).toBe(renderValue(exact, chars));
    }
  });

  it("shows in full a value first met below the render depth and met again higher up", async () => {
    // At depth 7, below what `renderValue` shows, `x` is copied without its entries; its second
    // reference, at depth 1, must not point back at that empty copy.
    const code = inBlock(
      "const x = { list: [1, 2, 3], map: new Map([[1, { q: 1 }]]) }; let w = x; for (let i = 0; i < 6; i++) w = [w]; return [w, x, new Set([x])];",
    );
    const { exact, shown } = await bothCopies(code, CHARS);
    expect((shown as unknown[])[1]).toEqual({ list: [1, 2, 3], map: new Map([[1, { q: 1 }]]) });
    expect(renderValue(shown, CHARS)).toBe(renderValue(exact, CHARS));
  });

  it("renders nested values of every shape as the exact copy does, at every budget", async () => {
    const sb = sandbox({ memoryLimitBytes: 256 * 1024 * 1024 });
    // Seeded shapes: arrays (some sparse), objects (some null-prototype, with integer and empty
    // keys), Maps, Sets, shared references and cycles, nested up to 10 deep.
    sb.evalSync(`function shape(seed) {
      let s = seed >>> 0;
      const r = () => (s = (s * 1664525 + 1013904223) >>> 0) / 2 ** 32;
      const pool = [];
      function v(d) {
        const k = r();
        if (d > 10 || k < 0.3) {
          const p = r();
          if (p < 0.3) return Math.floor(r() * 1000);
          if (p < 0.5) return "s".repeat(Math.floor(r() * 30));
          if (p < 0.6) return r() < 0.5 ? null : undefined;
          if (p < 0.7 && pool.length) return pool[Math.floor(r() * pool.length)];
          if (p < 0.75) return BigInt(Math.floor(r() * 1e6));
          return r() < 0.5;
        }
        const n = Math.floor(r() ** 3 * 3000);
        let c;
        if (k < 0.5) {
          c = [];
          if (r() < 0.2) { c.length = n; for (let i = 0; i < n; i += 1 + Math.floor(r() * 5)) c[i] = v(d + 1); }
          else for (let i = 0; i < n; i++) c.push(v(d + 1));
        } else if (k < 0.75) {
          c = r() < 0.1 ? Object.create(null) : {};
          for (let i = 0; i < n; i++) c[r() < 0.1 ? String(i) : r() < 0.05 ? "" : "k" + i] = v(d + 1);
          if (r() < 0.1) c.self = c;
        } else if (k < 0.88) {
          c = new Map();
          for (let i = 0; i < n; i++) c.set(r() < 0.5 ? i : "m" + i, v(d + 1));
        } else {
          c = new Set();
          for (let i = 0; i < n; i++) c.add(r() < 0.7 ? i : v(d + 1));
        }
        pool.push(c);
        return c;
      }
      return v(0);
    }`);
    for (let seed = 1; seed <= 16; seed++) {
      const exact = await sb.eval(`shape(${seed})`);
      for (const chars of [50, 1_000, 9_999]) {
        const report = await sb.run(`shape(${seed})`, { displayChars: chars });
        expect(report.ok).toBe(true);
        expect(renderValue((report as { value: unknown }).value, chars)).toBe(renderValue(exact, chars));
      }
    }
  });

  it("renders a thrown 300,000-key object to the same error message, within its own larger budget", async () => {
    const sb = sandbox();
    const code = inBlock(`${BUILD_BIG} throw big;`);
    const exact = await sb.run(code);
    const shown = await sb.run(code, { displayChars: 100 });
    expect(exact.ok || shown.ok).toBe(false);
    expect(!shown.ok && shown.error.message).toBe(!exact.ok && exact.error.message);
  });

  it("is the same value as the exact copy for a value within the budget, in run and runSync", async () => {
    const sb = sandbox();
    const code = inBlock(
      "const o = {}; for (let i = 0; i < 100; i++) o['k' + i] = { i, m: new Map([[i, [i]]]) }; return o;",
    );
    expect(((await sb.run(code, { displayChars: 2_000 })) as { value: unknown }).value).toEqual(sb.evalSync(code));
    expect((sb.runSync(code, { displayChars: 2_000 }) as { value: unknown }).value).toEqual(sb.evalSync(code));
  });

  it("copies for display in runSync too", () => {
    const sb = sandbox();
    const report = sb.runSync(inBlock(`${BUILD_BIG} return big;`), { displayChars: CHARS });
    expect(report.ok).toBe(true);
    expect(Object.keys((report as { value: object }).value).length).toBeLessThanOrEqual(keysWithin(CHARS));
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
    const hold = (report: EvalReport): void => {
      if (report.ok && typeof report.value === "object" && report.value !== null)
        heldKeys.push(Object.keys(report.value).length);
    };
    // The eval tool runs its evals with run(), or with runThenSnapshot() when it keeps the state after each.
    const run = Sandbox.prototype.run;
    vi.spyOn(Sandbox.prototype, "run").mockImplementation(async function (
      this: Sandbox,
      ...args: Parameters<Sandbox["run"]>
    ) {
      const report = await run.apply(this, args);
      hold(report);
      return report;
    });
    const runThenSnapshot = Sandbox.prototype.runThenSnapshot;
    vi.spyOn(Sandbox.prototype, "runThenSnapshot").mockImplementation(async function (
      this: Sandbox,
      ...args: Parameters<Sandbox["runThenSnapshot"]>
    ) {
      const result = await runThenSnapshot.apply(this, args);
      hold(result.report);
      return result;
    });
    const middleware = createCodeInterpreterMiddleware({ maxResultChars });
    try {
      const evalTool = middleware.tools[0] as unknown as {
        invoke(input: { code: string }, config: unknown): Promise<unknown>;
      };
      const output = await evalTool.invoke(
        { code: `${BUILD_BIG} big` },
        { configurable: { thread_id: "huge-result" } },
      );
      const text = typeof output === "string" ? output : String((output as { content: unknown }).content);
      expect(heldKeys).toHaveLength(1);
      expect(heldKeys[0]).toBeLessThanOrEqual(keysWithin(maxResultChars));
      expect(text).toMatch(/k0: 0,\s+k1: 1,/);
      expect(text).toMatch(/299,?\d{3} more keys/);
    } finally {
      middleware.dispose();
    }
  });
});
