import { describe, expect, it } from "vitest";
import type { ConsoleEntry } from "../../src/index.js";
import { sandbox } from "../hostile/harness.js"; // a sandbox disposed after the current test

const utf8Bytes = (entries: ConsoleEntry[]): number => entries.reduce((n, e) => n + Buffer.byteLength(e.text), 0);
const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

describe("console capture", () => {
  it("returns the documentation example's value and console lines", () => {
    const report = sandbox().runSync(
      'const rows=[{team:"alpha",score:8},{team:"beta",score:13},{team:"alpha",score:21}]; const totals=rows.reduce((acc,row)=>{acc[row.team]=(acc[row.team]??0)+row.score; console.log(`${row.team} score: ${acc[row.team]}`); return acc;},{}); totals;',
    );
    expect(report.ok).toBe(true);
    if (!report.ok) return;
    expect(report.value).toEqual({ alpha: 29, beta: 13 });
    expect(report.console).toEqual([
      { level: "log", text: "alpha score: 8" },
      { level: "log", text: "beta score: 13" },
      { level: "log", text: "alpha score: 29" },
    ]);
    expect(report.consoleTruncated).toBe(false);
  });

  it("keeps every level, in call order", () => {
    const report = sandbox().runSync(
      "console.info('i'); console.log('l'); console.error('e'); console.debug('d'); console.warn('w'); console.log('l2')",
    );
    expect(report.console).toEqual([
      { level: "info", text: "i" },
      { level: "log", text: "l" },
      { level: "error", text: "e" },
      { level: "debug", text: "d" },
      { level: "warn", text: "w" },
      { level: "log", text: "l2" },
    ]);
  });

  it("formats several arguments and structured values like Node's console", () => {
    const report = sandbox().runSync("console.log('a', 1, { b: [2, 'c'] }, 3n, null, undefined)");
    expect(report.console).toEqual([{ level: "log", text: "a 1 { b: [ 2, 'c' ] } 3n null undefined" }]);
  });

  it("shows functions and symbols in console output instead of failing", () => {
    const report = sandbox().runSync("console.log(function helper() {}, Symbol('s'), [1]); 'after'");
    expect(report.ok).toBe(true);
    expect(report.console).toHaveLength(1);
    expect(report.console[0]!.text).toContain("helper");
    expect(report.console[0]!.text).toContain("[ 1 ]");
  });

  it("does not run getters of logged objects", () => {
    const sb = sandbox();
    const report = sb.runSync(
      "globalThis.getterRuns = 0; console.log({ get x() { getterRuns++; return 1; } }); getterRuns",
    );
    expect(report.ok && report.value).toBe(0);
    expect(report.console).toHaveLength(1);
  });

  it("interleaves console output with host calls in order", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("tick", async ([n]) => n);
    const report = await sb.run("for (let i = 0; i < 3; i++) console.log('got', await tick(i)); 'done'");
    expect(report.console.map((e) => e.text)).toEqual(["got 0", "got 1", "got 2"]);
  });

  it("keeps console output of an eval that failed", () => {
    const report = sandbox().runSync("console.log('before'); throw new Error('after')");
    expect(report.ok).toBe(false);
    expect(report.console).toEqual([{ level: "log", text: "before" }]);
  });

  it("keeps console output of an eval that timed out", async () => {
    const report = await sandbox().run("console.warn('spinning'); while (true) {}", { timeoutMs: 100 });
    expect(report.ok).toBe(false);
    if (!report.ok) expect(report.error.code).toBe("TIMEOUT");
    expect(report.console).toEqual([{ level: "warn", text: "spinning" }]);
  });

  it("hands each eval only its own output", () => {
    const sb = sandbox();
    expect(sb.runSync("console.log('first')").console.map((e) => e.text)).toEqual(["first"]);
    expect(sb.runSync("console.log('second')").console.map((e) => e.text)).toEqual(["second"]);
    expect(sb.runSync("1").console).toEqual([]);
  });
});

describe("console byte cap", () => {
  it("stops keeping output at maxConsoleBytes and says it truncated", () => {
    const sb = sandbox({ maxConsoleBytes: 200 });
    const report = sb.runSync("for (let i = 0; i < 1000; i++) console.log('line ' + i); 'finished'");
    expect(report.ok && report.value).toBe("finished");
    expect(report.consoleTruncated).toBe(true);
    expect(report.console.length).toBeGreaterThan(0);
    expect(report.console.length).toBeLessThan(1000);
    expect(utf8Bytes(report.console)).toBeLessThanOrEqual(200);
    // What is kept is the beginning, in order.
    report.console.forEach((e, i) => {
      expect(e.text).toBe(`line ${i}`);
    });
  });

  it("drops a single line bigger than the cap and says so", () => {
    const report = sandbox({ maxConsoleBytes: 100 }).runSync("console.log('x'.repeat(10000)); 2");
    expect(report.ok && report.value).toBe(2);
    expect(report.consoleTruncated).toBe(true);
    expect(utf8Bytes(report.console)).toBeLessThanOrEqual(100);
  });

  it("counts multi-byte text in UTF-8 bytes against the cap", () => {
    const report = sandbox({ maxConsoleBytes: 1000 }).runSync(
      "for (let i = 0; i < 10; i++) console.log('中'.repeat(100));",
    );
    expect(report.consoleTruncated).toBe(true);
    expect(utf8Bytes(report.console)).toBeLessThanOrEqual(1000);
  });

  it("does not report truncation when the output fits", () => {
    const report = sandbox({ maxConsoleBytes: 1000 }).runSync("console.log('short')");
    expect(report.consoleTruncated).toBe(false);
  });

  it("starts every eval with a fresh cap", () => {
    const sb = sandbox({ maxConsoleBytes: 100 });
    expect(sb.runSync("for (let i = 0; i < 100; i++) console.log(i)").consoleTruncated).toBe(true);
    const next = sb.runSync("console.log('fresh')");
    expect(next.consoleTruncated).toBe(false);
    expect(next.console).toEqual([{ level: "log", text: "fresh" }]);
  });

  it("keeps a console flood from exhausting host memory", () => {
    const sb = sandbox({ maxConsoleBytes: 64 * 1024 });
    const report = sb.runSync(
      "const big = 'y'.repeat(1 << 20); for (let i = 0; i < 2000; i++) console.log(big); 'ok'",
      { timeoutMs: 20_000 },
    );
    expect(report.ok && report.value).toBe("ok");
    expect(report.consoleTruncated).toBe(true);
    expect(utf8Bytes(report.console)).toBeLessThanOrEqual(64 * 1024);
  });
});

describe("captureConsole: false", () => {
  it("keeps a working console object and discards its output", () => {
    const sb = sandbox({ captureConsole: false });
    const report = sb.runSync(
      "console.log('hidden'); console.error('hidden too'); [typeof console.log, typeof console.warn]",
    );
    expect(report.ok && report.value).toEqual(["function", "function"]);
    expect(report.console).toEqual([]);
    expect(report.consoleTruncated).toBe(false);
  });
});

describe("console of an ended eval never reaches the next one", () => {
  it("drops output from a timed-out eval's pending async work", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("slow", async () => {
      await sleep(200);
      return 1;
    });
    const timedOut = await sb.run(
      "(async () => { await slow(); console.log('LATE'); })(); Promise.resolve().then(() => console.log('LEFTOVER JOB')); while (true) {}",
      { timeoutMs: 100 },
    );
    expect(timedOut.ok).toBe(false);
    await sleep(400); // the host result arrives while no eval runs
    const next = await sb.run("console.log('next'); await slow(); console.log('next done'); 5");
    expect(next.ok && next.value).toBe(5);
    expect(next.console.map((e) => e.text)).toEqual(["next", "next done"]);
    const sync = sb.runSync("console.log('sync'); 6");
    expect(sync.console.map((e) => e.text)).toEqual(["sync"]);
  });

  it("drops output from an aborted eval's pending work", async () => {
    const sb = sandbox();
    sb.defineAsyncFunction("wait", async ([ms]) => {
      await sleep(Number(ms));
      return 0;
    });
    let calls = 0;
    sb.defineAsyncFunction("counted", () => ++calls);
    const controller = new AbortController();
    const pending = sb.run(
      "(async () => { await wait(150); console.log('ABORTED LEAK'); })(); await counted(); await wait(10000)",
      { signal: controller.signal },
    );
    // Aborted once the guest has started both waits (a fixed 50 ms could abort before it ran).
    while (calls < 1) await sleep(5);
    controller.abort();
    const aborted = await pending;
    expect(aborted.ok).toBe(false);
    await sleep(300);
    const next = await sb.run("await wait(200); console.log('mine'); 1");
    expect(next.console.map((e) => e.text)).toEqual(["mine"]);
  });
});

describe("live console", () => {
  it("hands each line to onConsole while the eval is still running", async () => {
    const sb = sandbox();
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    sb.defineAsyncFunction("gate", () => gate);
    const seen: ConsoleEntry[] = [];
    const running = sb.run("console.log('before'); await gate(); console.warn('after', { n: 1 }); 7", {
      onConsole: (entry) => {
        seen.push(entry);
        if (entry.text === "before") release();
      },
    });
    const report = await running;
    // The gate only opens when the first line arrived live, so the eval can only finish if it did.
    expect(report.ok && report.value).toBe(7);
    expect(seen).toEqual([
      { level: "log", text: "before" },
      { level: "warn", text: "after { n: 1 }" },
    ]);
    expect(report.console).toEqual(seen);
  });

  it("ignores a listener that throws", async () => {
    const report = await sandbox().run("console.log('x'); 1", {
      onConsole: () => {
        throw new Error("listener failed");
      },
    });
    expect(report.ok && report.value).toBe(1);
    expect(report.console).toEqual([{ level: "log", text: "x" }]);
  });
});
