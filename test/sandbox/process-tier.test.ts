// isolation: "process": the same Sandbox API, served by a confined helper process.
import { spawnSync } from "node:child_process";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { afterEach, describe, expect, it } from "vitest";
import { Sandbox, SandboxError } from "../../src/index.js";
import { addonDirectory } from "../../src/native.js";

// Not under the sanitizers (scripts/test-sanitize.js sets QJSN_SANITIZED): a helper built with them
// makes system calls (sigaltstack, report files) its seccomp filter refuses.
const underSanitizers = process.env.QJSN_SANITIZED === "1";

const opened: Sandbox[] = [];
function remote(options: ConstructorParameters<typeof Sandbox>[0] = {}): Sandbox {
  const s = new Sandbox({ isolation: "process", ...options });
  opened.push(s);
  return s;
}
afterEach(() => {
  for (const s of opened.splice(0)) s.dispose();
});

describe.skipIf(underSanitizers)("isolation: process", () => {
  it("evalSync and eval answer from the helper process", async () => {
    const s = remote();
    expect(s.processId).toBeGreaterThan(0);
    expect(s.processId).not.toBe(process.pid);
    expect(s.evalSync("1 + 1")).toBe(2);
    expect(await s.eval("await Promise.resolve(40) + 2")).toBe(42);
    expect(s.evalSync("({ a: [1, 'x', null] })")).toEqual({ a: [1, "x", null] });
  });

  it("sync and async host functions are called from guest code in the helper", async () => {
    const s = remote();
    const seen: unknown[] = [];
    s.defineFunction("add", (a, b) => (a as number) + (b as number));
    s.defineFunction("tools.echo", (v) => {
      seen.push(v);
      return { got: v };
    });
    s.defineAsyncFunction("later", async (args) => (args[0] as number) * 10);
    expect(s.evalSync("add(2, 3)")).toBe(5);
    expect(await s.eval("add(4, 5)")).toBe(9);
    expect(s.evalSync("tools.echo({ deep: [1, 2] })")).toEqual({ got: { deep: [1, 2] } });
    expect(await s.eval("(await later(4)) + (await later(1))")).toBe(50);
    expect(seen).toEqual([{ deep: [1, 2] }]);
  });

  it("a host function's error becomes a guest error", async () => {
    const s = remote();
    s.defineFunction("fail", () => {
      throw new Error("nope");
    });
    expect(s.evalSync("try { fail() } catch (e) { e.message }")).toBe("nope");
  });

  it("console, stats and thrown values come back as in-process", async () => {
    const s = remote();
    const report = await s.run("console.log('hi', 42); console.error('bad'); 7");
    expect(report.ok && report.value).toBe(7);
    expect(report.console).toEqual([
      { level: "log", text: "hi 42" },
      { level: "error", text: "bad" },
    ]);
    expect(report.stats.memoryUsedBytes).toBeGreaterThan(0);
    await expect(s.eval("throw new TypeError('x')")).rejects.toMatchObject({ code: "GUEST_ERROR" });
    expect(() => s.evalSync("(")).toThrow(expect.objectContaining({ code: "SYNTAX_ERROR" }));
  });

  it("limits end evals with the same typed errors", async () => {
    const s = remote({ memoryLimitBytes: 8 * 1024 * 1024 });
    expect(() => s.evalSync("while (true) {}", { timeoutMs: 50 })).toThrow(
      expect.objectContaining({ code: "TIMEOUT" }),
    );
    await expect(s.eval("while (true) {}", { timeoutMs: 50 })).rejects.toMatchObject({ code: "TIMEOUT" });
    await expect(s.eval("const a = []; while (true) a.push(new Array(1e5).fill(1))")).rejects.toMatchObject({
      code: "OUT_OF_MEMORY",
    });
    s.defineAsyncFunction("never", () => new Promise(() => {}));
    await expect(s.eval("await never()", { wallTimeoutMs: 50 })).rejects.toMatchObject({
      code: "TIMEOUT",
      budget: "wall",
    });
    expect(s.evalSync("1 + 1")).toBe(2);
  });

  it("setGlobal, getGlobal and memoryUsage reach the helper's runtime", () => {
    const s = remote();
    s.setGlobal("data", { rows: [1, 2, 3] });
    expect(s.evalSync("data.rows.length")).toBe(3);
    s.evalSync("globalThis.out = data.rows.map((x) => x * 2)");
    expect(s.getGlobal("out")).toEqual([2, 4, 6]);
    expect(s.memoryUsage().limitBytes).toBe(s.options.memoryLimitBytes);
  });

  it("globalNames, frozen host functions, and BUSY while an eval runs", async () => {
    const s = remote();
    s.evalSync("var mine = 1");
    expect(s.globalNames()).toContain("mine");
    expect(s.defineFrozenAsyncFunction("service", async (args) => ({ echoed: args[0] }))).toBe(true);
    expect(await s.eval("(await service(5)).echoed")).toBe(5);
    expect(s.evalSync("delete globalThis.service; typeof service")).toBe("function");
    let release: () => void = () => {};
    s.defineAsyncFunction("gate", () => new Promise<void>((resolve) => (release = resolve)));
    const running = s.eval("await gate(); 1");
    await new Promise((resolve) => setTimeout(resolve, 20));
    expect(() => s.setGlobal("x", 1)).toThrow(expect.objectContaining({ code: "BUSY" }));
    expect(() => s.globalNames()).toThrow(expect.objectContaining({ code: "BUSY" }));
    release();
    expect(await running).toBe(1);
  });

  it("dispose fails the eval in flight with DISPOSED and later calls too", async () => {
    const s = remote();
    s.defineAsyncFunction("never", () => new Promise(() => {}));
    const pending = s.eval("await never()");
    s.dispose();
    await expect(pending).rejects.toMatchObject({ code: "DISPOSED" });
    expect(() => s.evalSync("1")).toThrow(expect.objectContaining({ code: "DISPOSED" }));
  });

  it("sandboxes of one partition share a helper, other partitions get their own", () => {
    const a = remote({ partition: "tenant-a" });
    const a2 = remote({ partition: "tenant-a" });
    const b = remote({ partition: "tenant-b" });
    expect(a2.processId).toBe(a.processId);
    expect(b.processId).not.toBe(a.processId);
    a.setGlobal("secret", "a");
    expect(a2.evalSync("typeof secret")).toBe("undefined");
  });

  it("the helper runs under its seccomp filter with no new privileges", () => {
    const s = remote();
    const status = readFileSync(`/proc/${s.processId}/status`, "utf8");
    expect(status).toMatch(/^Seccomp:\s+2$/m);
    expect(status).toMatch(/^NoNewPrivs:\s+1$/m);
  });

  it("snapshots move between the tiers both ways, sync and async", async () => {
    const a = remote();
    a.evalSync("var counter = 41; function inc() { return ++counter } class P { hi() { return 'hi' } }");
    const inProcess = Sandbox.restore(a.snapshot()).sandbox;
    opened.push(inProcess);
    expect(inProcess.evalSync("inc() + new P().hi()")).toBe("42hi");
    const back = Sandbox.restore(inProcess.snapshot(), { isolation: "process" }).sandbox;
    opened.push(back);
    expect(back.processId).toBeGreaterThan(0);
    expect(back.evalSync("inc()")).toBe(43);
    const restored = await Sandbox.restoreAsync(await back.snapshotAsync(), { isolation: "process" });
    opened.push(restored.sandbox);
    expect(await restored.sandbox.eval("inc()")).toBe(44);
    const after = await restored.sandbox.runThenSnapshot("counter += 100");
    expect(after.report.ok && after.report.value).toBe(144);
    const last = Sandbox.restore(after.snapshot!).sandbox;
    opened.push(last);
    expect(last.evalSync("counter")).toBe(144);
  });

  it("a session whose helper died comes back from its last snapshot, in either tier", async () => {
    const s = remote({ partition: "recovered" });
    s.evalSync("var notes = ['a', 'b']");
    const last = s.snapshot();
    process.kill(s.processId!, "SIGKILL");
    await expect(s.eval("notes.push('c')")).rejects.toMatchObject({ code: "WORKER_LOST" });
    for (const isolation of ["process", "in-process"] as const) {
      const { sandbox } = Sandbox.restore(last, { isolation, partition: "recovered" });
      opened.push(sandbox);
      expect(sandbox.evalSync("notes.join('')")).toBe("ab");
    }
  });

  it("a helper built from other sources than the addon refuses to serve (its frames would be misread)", () => {
    const helper = join(addonDirectory, "quickjs-native-helper");
    const run = spawnSync(helper, ["0", "unconfined", "Create,Dispose,"], { stdio: "ignore", timeout: 10_000 });
    expect(run.status).toBe(71);
  });

  it("rejects an unknown isolation with a friendly error", () => {
    expect(() => new Sandbox({ isolation: "thread" as never })).toThrow(
      new SandboxError("INVALID_ARGUMENT", 'isolation must be "in-process" or "process"; got \'thread\''),
    );
  });
});
