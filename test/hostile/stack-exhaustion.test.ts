/**
 * Guest code that exhausts the native stack, on the Node main thread (evalSync) and on executor
 * threads (eval). A wrong stack bound is a SIGSEGV that takes the whole process down, so every
 * case runs in a child Node process on the built package (dist/, as `npm test` builds it first)
 * and the test asserts on the child's exit status and its report.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";

const entry = fileURLToPath(new URL("../../dist/index.js", import.meta.url));
const MiB = 1024 * 1024;

interface ChildResult {
  status: number | null;
  signal: NodeJS.Signals | null;
  outcome?: { ok: boolean; value?: string; code?: string };
  stderr: string;
}

/** Runs `code` in a fresh sandbox in a child process, in the given mode. */
function runInChild(mode: "sync" | "async", options: Record<string, unknown>, code: string): ChildResult {
  const script = `
    const { Sandbox } = await import(${JSON.stringify(entry)});
    const sb = new Sandbox(${JSON.stringify(options)});
    let outcome;
    try {
      const v = ${JSON.stringify(mode)} === "sync" ? sb.evalSync(process.env.GUEST_CODE, { timeoutMs: 20000 }) : await sb.eval(process.env.GUEST_CODE, { timeoutMs: 20000 });
      outcome = { ok: true, value: String(v).slice(0, 100) };
    } catch (err) {
      outcome = { ok: false, code: err.code ?? String(err) };
    }
    // The sandbox must still answer after the overflow.
    const after = ${JSON.stringify(mode)} === "sync" ? sb.evalSync("1+1") : await sb.eval("1+1");
    process.stdout.write(JSON.stringify({ ...outcome, after }));
  `;
  const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, GUEST_CODE: code },
    encoding: "utf8",
    timeout: 60_000,
  });
  let outcome: ChildResult["outcome"];
  try {
    const parsed = JSON.parse(child.stdout) as { ok: boolean; after: unknown; value?: string; code?: string };
    if (parsed.after !== 2) throw new Error("sandbox unusable after the overflow");
    outcome = { ok: parsed.ok, value: parsed.value, code: parsed.code };
  } catch {
    outcome = undefined;
  }
  return { status: child.status, signal: child.signal, outcome, stderr: child.stderr.slice(-2000) };
}

/** The largest maxStackSizeBytes the engine accepts (its own bound for the thread stacks). */
function largestAcceptedStack(): number {
  const script = `
    const { Sandbox } = await import(${JSON.stringify(entry)});
    let best = 0;
    for (let size = 64 * 1024; size <= 1024 * 1024 * 1024; size *= 2) {
      try { new Sandbox({ maxStackSizeBytes: size }).dispose(); best = size; } catch { break; }
    }
    process.stdout.write(String(best));
  `;
  const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
  return Number(child.stdout);
}

const recursionCases: Array<[string, string]> = [
  ["plain recursion", "function f() { return f() + 1; } f()"],
  ["recursion through Array.prototype.map", "function g() { return [1].map(g); } g()"],
  ["recursion through Reflect.apply", "function h() { return Reflect.apply(h, null, []); } h()"],
  ["recursion through a getter", "const o = { get x() { return this.x; } }; o.x"],
  ["recursion through toString", "const t = { toString() { return String(this); } }; String(t)"],
  ["JSON.parse of deeply nested arrays", "JSON.parse('['.repeat(1e6))"],
  [
    "JSON.stringify of a deeply nested object",
    "let o = {}; for (let i = 0; i < 1e6; i++) o = { o }; JSON.stringify(o).length",
  ],
  ["String() of deeply nested arrays", "let a = []; for (let i = 0; i < 1e6; i++) a = [a]; String(a).length"],
  ["a Proxy chain", "let p = {}; for (let i = 0; i < 1e5; i++) p = new Proxy(p, {}); p.x"],
  ["deeply nested source code", "eval('('.repeat(1e5) + '1' + ')'.repeat(1e5))"],
  ["a deeply nested regular expression", "new RegExp('(?:'.repeat(1e5) + 'a' + ')'.repeat(1e5)).test('a')"],
];

describe("deep recursion never crashes the process", () => {
  let maxStack = 0;
  beforeAll(() => {
    expect(existsSync(entry), "dist/index.js is missing: run `npm run build:ts` first").toBe(true);
    maxStack = largestAcceptedStack();
    expect(maxStack).toBeGreaterThanOrEqual(1 * MiB);
  });

  for (const mode of ["sync", "async"] as const) {
    const where = mode === "sync" ? "on the main thread (evalSync)" : "on an executor thread (eval)";
    it.each(recursionCases)(`survives %s ${where} with the default stack size`, (_label, code) => {
      const r = runInChild(mode, { memoryLimitBytes: 256 * MiB }, code);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(0);
      expect(r.outcome, r.stderr).toBeDefined();
      expect(["STACK_OVERFLOW", "OUT_OF_MEMORY", "GUEST_ERROR", undefined]).toContain(r.outcome!.code);
    });

    it(`survives plain recursion ${where} with the largest accepted maxStackSizeBytes`, () => {
      const r = runInChild(
        mode,
        { maxStackSizeBytes: maxStack, memoryLimitBytes: 256 * MiB },
        "function f() { return f() + 1; } f()",
      );
      expect(r.signal, `maxStackSizeBytes ${maxStack}: ${r.stderr}`).toBeNull();
      expect(r.status, r.stderr).toBe(0);
      expect(r.outcome?.code).toBe("STACK_OVERFLOW");
    });

    it(`survives recursion through built-ins ${where} with the largest accepted maxStackSizeBytes`, () => {
      const r = runInChild(
        mode,
        { maxStackSizeBytes: maxStack, memoryLimitBytes: 256 * MiB },
        "function g() { return [1].map(g); } g()",
      );
      expect(r.signal, `maxStackSizeBytes ${maxStack}: ${r.stderr}`).toBeNull();
      expect(r.status, r.stderr).toBe(0);
      expect(r.outcome?.code).toBe("STACK_OVERFLOW");
    });
  }

  it("survives recursion from a sync host function that re-enters another sandbox", () => {
    const script = `
      const { Sandbox } = await import(${JSON.stringify(entry)});
      const boxes = Array.from({ length: 6 }, () => new Sandbox());
      boxes.forEach((sb, i) => sb.defineFunction("next", () => {
        const nextBox = boxes[i + 1];
        return nextBox ? nextBox.evalSync("function f(d) { return d > 1e9 ? 0 : f(d + 1); } try { f(0) } catch {} next()") : 0;
      }));
      let code = "none";
      try { boxes[0].evalSync("function f(d) { return d > 1e9 ? 0 : f(d + 1); } try { f(0) } catch {} next()"); } catch (e) { code = e.code; }
      process.stdout.write(code);
    `;
    const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
      encoding: "utf8",
      timeout: 60_000,
    });
    expect(child.signal, child.stderr).toBeNull();
    expect(child.status, child.stderr).toBe(0);
  });
});
