// Hazard: evalSync runs guest code on whatever thread calls it. A Worker created with
// `resourceLimits: { stackSizeMb: 0.5 }` has far less stack than the guest's default budget, and
// recursion there took the whole process down with SIGSEGV. The guest's budget is now clamped to
// what the calling thread has left (minus a reserve for C frames), and when too little is left
// the call is refused with a typed error before anything runs. A crash must fail the test, not
// kill vitest: each case runs in a child process on the built package (dist/).
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";
import { beforeAll, describe, expect, it } from "vitest";

const entry = fileURLToPath(new URL("../../dist/index.js", import.meta.url));

interface WorkerReport {
  outcomes?: Array<{ code: string; message: string }>;
  after?: unknown;
  error?: string;
}

/**
 * In a child process, starts a Worker with `stackSizeMb` of stack whose code runs each guest in
 * its own sandbox with evalSync, then restores a snapshot holding a function (which re-runs its
 * source), and reports each outcome.
 */
function runInSmallWorker(
  stackSizeMb: number,
  guests: string[],
): { signal: NodeJS.Signals | null; status: number | null; report?: WorkerReport; stderr: string } {
  const workerCode = `
    const { parentPort, workerData } = await import("node:worker_threads");
    await (async () => {
      const { Sandbox } = await import(workerData.entry);
      const outcomes = [];
      const attempt = (fn) => {
        try {
          const v = fn();
          outcomes.push({ code: "OK", message: String(v).slice(0, 80) });
        } catch (err) {
          outcomes.push({ code: err.code ?? "PLAIN:" + err.name, message: String(err.message).slice(0, 200) });
        }
      };
      for (const guest of workerData.guests) {
        const sb = new Sandbox({ memoryLimitBytes: 256 * 1024 * 1024 });
        attempt(() => sb.evalSync(guest));
        sb.dispose();
      }
      const source = new Sandbox();
      source.evalSync("function twice(x) { return 2 * x }");
      attempt(() => {
        const { sandbox } = Sandbox.restore(source.snapshot());
        try { return sandbox.evalSync("twice(21)"); } finally { sandbox.dispose(); }
      });
      // Host-side entries (setGlobal, getGlobal, snapshot) clamp the stack budget too.
      attempt(() => {
        const g = new Sandbox();
        try {
          g.setGlobal("x", { a: [1, { b: 2n }] });
          return JSON.stringify(g.getGlobal("x"), (_k, v) => (typeof v === "bigint" ? String(v) : v)) + g.snapshot().length;
        } finally { g.dispose(); }
      });
      const sb = new Sandbox();
      let after;
      try { after = sb.evalSync("1 + 1"); } catch (err) { after = err.code; }
      parentPort.postMessage({ outcomes, after });
    })().catch((err) => parentPort.postMessage({ error: String(err && err.stack || err) }));
  `;
  const script = `
    import { Worker } from "node:worker_threads";
    const w = new Worker(process.env.WORKER_CODE, { eval: true, workerData: JSON.parse(process.env.WORKER_DATA), resourceLimits: { stackSizeMb: ${stackSizeMb} } });
    w.on("message", (m) => { process.stdout.write(JSON.stringify(m)); process.exit(0); });
    w.on("error", (e) => { process.stdout.write(JSON.stringify({ error: String(e && e.stack || e) })); process.exit(0); });
  `;
  const child = spawnSync(process.execPath, ["--input-type=module", "-e", script], {
    env: { ...process.env, WORKER_CODE: workerCode, WORKER_DATA: JSON.stringify({ entry, guests }) },
    encoding: "utf8",
    timeout: 120_000,
  });
  let report: WorkerReport | undefined;
  try {
    report = JSON.parse(child.stdout) as WorkerReport;
  } catch {
    report = undefined;
  }
  return { signal: child.signal, status: child.status, report, stderr: child.stderr.slice(-2000) };
}

const GUESTS = [
  "function f() { return f() + 1; } f()",
  "function g() { return [1].map(g); } g()",
  "JSON.parse('['.repeat(1e6))",
  "new RegExp('(?:'.repeat(1e5) + 'a' + ')'.repeat(1e5)).test('a')",
  "eval('('.repeat(1e5) + '1' + ')'.repeat(1e5))",
];

describe("evalSync on a thread with a small stack", () => {
  beforeAll(() => {
    expect(existsSync(entry), "dist/index.js is missing: run `npm run build:ts` first").toBe(true);
  });

  it.each([0.5, 1, 4])(
    "gives STACK_OVERFLOW (or a typed refusal), never a signal, in a Worker with %s MB of stack",
    (stackSizeMb) => {
      const r = runInSmallWorker(stackSizeMb, GUESTS);
      expect(r.signal, r.stderr).toBeNull();
      expect(r.status, r.stderr).toBe(0);
      expect(r.report?.error, r.stderr).toBeUndefined();
      const outcomes = r.report!.outcomes!;
      expect(outcomes).toHaveLength(GUESTS.length + 2);
      // Recursion and nesting: a typed stack error. The engine's own nesting caps may answer first
      // with a guest SyntaxError/RangeError, which is typed too.
      for (const o of outcomes.slice(0, GUESTS.length))
        expect(["STACK_OVERFLOW", "SYNTAX_ERROR", "GUEST_ERROR"], o.message).toContain(o.code);
      expect(outcomes[0]!.code).toBe("STACK_OVERFLOW");
      // Restoring re-runs function source: it works, or is refused with a typed error.
      expect(["OK", "STACK_OVERFLOW"]).toContain(outcomes[GUESTS.length]!.code);
      if (outcomes[GUESTS.length]!.code === "OK") expect(outcomes[GUESTS.length]!.message).toBe("42");
      const hostSide = outcomes[GUESTS.length + 1]!;
      expect(["OK", "STACK_OVERFLOW"]).toContain(hostSide.code);
      if (hostSide.code === "OK") expect(hostSide.message).toMatch(/^\{"a":\[1,\{"b":"2"\}\]\}\d+$/);
      expect(["STACK_OVERFLOW", 2]).toContain(r.report!.after);
    },
  );
});
