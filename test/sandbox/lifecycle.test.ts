import { describe, expect, it } from "vitest";
import { Sandbox } from "../../src/index.js";

// Counted work (thousands of sandboxes), not timed: on a loaded machine the 10,000-sandbox round took
// 365 s, past the 240 s it had (240 s also in a quiet-ish baseline run).
const LIFECYCLE_TIMEOUT_MS = 900_000;

const MiB = 1024 * 1024;
const gc = (globalThis as { gc?: () => void }).gc;

/** Memory after a full collection, with finalizers given time to run. */
async function settledMemory(): Promise<NodeJS.MemoryUsage> {
  for (let i = 0; i < 4; i++) {
    gc?.();
    await new Promise((r) => setImmediate(r));
    await new Promise((r) => setTimeout(r, 10));
  }
  return process.memoryUsage();
}

interface Growth {
  /** Growth of the whole process's resident memory over the first measured pass. */
  rss: number;
  /**
   * Growth outside the V8 heap (what native code kept), the smaller of two consecutive measured
   * passes: allocator trimming and heap resizing move it by several MiB either way once, while a
   * leak grows it in every pass.
   */
  native: number;
}

// Under the ASan+UBSan build every allocation is slow, and freed memory sits in ASan's quarantine
// (hundreds of MiB), so RSS says nothing there: the sanitizer run does fewer rounds and relies on
// the engine's own leak assertions in JS_FreeRuntime and on LeakSanitizer instead.
const SANITIZED = process.env.QJSN_SANITIZED === "1";
const SANITIZED_SCALE = SANITIZED ? 0.1 : 1;
const RSS_LIMIT = SANITIZED ? Number.POSITIVE_INFINITY : 10 * MiB;

/**
 * Memory growth over `rounds` runs of `make`, measured after one full warm-up pass of the same
 * workload: V8 grows its young generation (in steps of up to 16 MiB) under allocation pressure and
 * keeps it, so only growth past that steady state is a leak.
 */
async function growthOver(requestedRounds: number, make: (i: number) => Promise<void> | void): Promise<Growth> {
  const rounds = Math.max(100, Math.round(requestedRounds * SANITIZED_SCALE));
  const pass = async (): Promise<void> => {
    for (let i = 0; i < rounds; i++) await make(i);
  };
  await pass();
  const start = await settledMemory();
  await pass();
  const middle = await settledMemory();
  await pass();
  const end = await settledMemory();
  const nativeOf = (a: NodeJS.MemoryUsage, b: NodeJS.MemoryUsage): number =>
    b.rss - a.rss - (b.heapTotal - a.heapTotal);
  const growth = { rss: middle.rss - start.rss, native: Math.min(nativeOf(start, middle), nativeOf(middle, end)) };
  const mib = (n: number): string => (n / MiB).toFixed(2);
  console.info(
    `growth over ${rounds} rounds: RSS ${mib(growth.rss)} MiB; outside the V8 heap ${mib(nativeOf(start, middle))} then ${mib(nativeOf(middle, end))} MiB`,
  );
  return growth;
}

describe("sandbox lifecycle leaks nothing", () => {
  it("runs with a collectable heap (--expose-gc)", () => {
    expect(typeof gc).toBe("function");
  });

  it(
    "leaves RSS within 10 MiB after 10,000 sandboxes created and disposed",
    async () => {
      const growth = await growthOver(10_000, () => {
        const sb = new Sandbox();
        sb.dispose();
      });
      expect(growth.rss).toBeLessThan(RSS_LIMIT);
    },
    LIFECYCLE_TIMEOUT_MS,
  );

  it(
    "keeps native memory within 10 MiB after 10,000 sandboxes that defined functions and evaluated",
    async () => {
      const growth = await growthOver(10_000, (i) => {
        using sb = new Sandbox();
        sb.defineFunction("tools.id", (x) => x);
        sb.setGlobal("input", { i, list: [1, 2, 3] });
        expect(sb.evalSync("console.log(input.i); tools.id(input).list.length")).toBe(3);
      });
      expect(growth.native).toBeLessThan(RSS_LIMIT);
    },
    LIFECYCLE_TIMEOUT_MS,
  );

  it(
    "keeps native memory within 10 MiB after 2,000 async evals with host calls on fresh sandboxes",
    async () => {
      const growth = await growthOver(2_000, async () => {
        const sb = new Sandbox();
        sb.defineAsyncFunction("fetchIt", async ([x]) => ({ x }));
        expect(await sb.eval("(await fetchIt(4)).x")).toBe(4);
        sb.dispose();
      });
      expect(growth.native).toBeLessThan(RSS_LIMIT);
    },
    LIFECYCLE_TIMEOUT_MS,
  );

  it(
    "keeps native memory within 10 MiB after 1,000 sandboxes disposed mid-eval",
    async () => {
      const growth = await growthOver(1_000, async (i) => {
        const sb = new Sandbox();
        sb.defineAsyncFunction("never", () => new Promise(() => {}));
        const pending = sb
          .eval(i % 2 ? "const big = new Uint8Array(1 << 20); while (true) {}" : "await never()")
          .catch(() => undefined);
        await new Promise((r) => setImmediate(r));
        sb.dispose();
        await pending;
      });
      expect(growth.native).toBeLessThan(RSS_LIMIT);
    },
    LIFECYCLE_TIMEOUT_MS,
  );

  it(
    "frees sandboxes that were dropped without dispose once they are collected",
    async () => {
      const growth = await growthOver(1_000, () => {
        const sb = new Sandbox();
        sb.evalSync("globalThis.blob = new Uint8Array(64 * 1024).fill(1); 0");
      });
      // 1,000 forgotten runtimes holding 64 KiB each would be over 60 MiB if never freed.
      expect(growth.native).toBeLessThan(RSS_LIMIT);
    },
    LIFECYCLE_TIMEOUT_MS,
  );

  it(
    "keeps one long-lived sandbox's memory flat across many evals",
    async () => {
      const sb = new Sandbox();
      try {
        for (let i = 0; i < 200; i++)
          sb.evalSync(`{ const tmp = Array.from({ length: 1000 }, (_, j) => ({ j })); tmp.length }`);
        const before = sb.memoryUsage().usedBytes;
        for (let i = 0; i < 5000; i++)
          sb.evalSync(`{ const tmp = Array.from({ length: 1000 }, (_, j) => ({ j })); tmp.length }`);
        const after = sb.memoryUsage().usedBytes;
        expect(after - before).toBeLessThan(1 * MiB);
      } finally {
        sb.dispose();
      }
    },
    LIFECYCLE_TIMEOUT_MS,
  );
});
