// A helper process that dies (SIGKILL, SIGSEGV) costs only its sandboxes: their evals in flight
// reject with WORKER_LOST within a second, they stay broken, and every other sandbox of both tiers
// answers correctly meanwhile; a new sandbox of the same partition gets a fresh helper.
import { spawnSync } from "node:child_process";
import { fileURLToPath } from "node:url";
import { describe, expect, it } from "vitest";
import type { Sandbox } from "../../src/index.js";
import { sandbox } from "./harness.js";

// Not under the sanitizers (scripts/test-sanitize.js sets QJSN_SANITIZED): a helper built with them
// makes system calls (sigaltstack, report files) its seccomp filter refuses.
const underSanitizers = process.env.QJSN_SANITIZED === "1";

const LOOP = "let n = 0; while (true) { n++ }";

async function killedDuringEval(signal: NodeJS.Signals): Promise<void> {
  const partition = `victim-${signal}`;
  const victim = sandbox({ isolation: "process", partition, executionTimeoutMs: 60_000 });
  const neighbour = sandbox({ isolation: "process", partition }); // shares the victim's helper
  expect(neighbour.processId).toBe(victim.processId);
  const others: Sandbox[] = [];
  for (let i = 0; i < 50; i++)
    others.push(sandbox(i % 2 === 0 ? { isolation: "process", partition: "bystanders" } : {}));
  for (const [i, s] of others.entries()) s.defineAsyncFunction("id", async () => i);

  const inFlight = victim.eval(LOOP);
  const answers = others.map((s, i) =>
    s.eval(`let sum = 0; for (let k = 0; k < 20000; k++) sum += k % 7; (await id()) * 1000000 + sum + ${i}`),
  );
  // The victim's eval is running in its helper (its evalSync neighbour would wait for nothing).
  await new Promise((resolve) => setTimeout(resolve, 50));
  const killedAt = performance.now();
  process.kill(victim.processId!, signal);
  const failure = await inFlight.then(
    () => undefined,
    (err: unknown) => err,
  );
  const detectedMs = performance.now() - killedAt;
  expect(failure).toMatchObject({ code: "WORKER_LOST" });
  expect((failure as Error).message).toContain(signal);
  expect(detectedMs).toBeLessThan(1000);

  const expected = (i: number): number => {
    let sum = 0;
    for (let k = 0; k < 20000; k++) sum += k % 7;
    return i * 1000000 + sum + i;
  };
  expect(await Promise.all(answers)).toEqual(others.map((_, i) => expected(i)));

  expect(victim.broken).toBe(true);
  expect(neighbour.broken).toBe(true);
  expect(() => victim.evalSync("1")).toThrow(expect.objectContaining({ code: "WORKER_LOST" }));
  await expect(neighbour.eval("1")).rejects.toMatchObject({ code: "WORKER_LOST" });
  const replacement = sandbox({ isolation: "process", partition });
  expect(replacement.processId).not.toBe(victim.processId);
  expect(replacement.evalSync("6 * 7")).toBe(42);
}

describe.skipIf(underSanitizers)("a lost helper process", () => {
  it("SIGKILL during an eval rejects it with WORKER_LOST and leaves 50 other sandboxes answering", async () => {
    await killedDuringEval("SIGKILL");
  });

  it("SIGSEGV during an eval rejects it with WORKER_LOST and leaves 50 other sandboxes answering", async () => {
    await killedDuringEval("SIGSEGV");
  });

  it("a helper killed during evalSync fails that evalSync with WORKER_LOST, saying how it died", () => {
    // Repeated: the kill races the answer to the host call, which may or may not be written.
    for (let i = 0; i < 10; i++) {
      const s = sandbox({ isolation: "process", partition: `victim-sync-${i}` });
      s.defineFunction("killMyHelper", () => {
        process.kill(s.processId!, "SIGKILL");
      });
      expect(() => s.evalSync("killMyHelper(); while (true) {}")).toThrow(
        expect.objectContaining({ code: "WORKER_LOST", message: expect.stringContaining("SIGKILL") }),
      );
      expect(s.broken).toBe(true);
    }
  });

  it("the process exits cleanly while helper channels are open (no abort at environment teardown)", () => {
    const entry = fileURLToPath(new URL("../../dist/index.js", import.meta.url));
    const script = `
      const { Sandbox } = await import(${JSON.stringify(entry)});
      const s = new Sandbox({ isolation: "process" });
      await s.eval("1 + 1");
      s.dispose();
      new Sandbox({ isolation: "process", partition: "kept" }).evalSync("1");
      // A helper lost just before the end: its loss is delivered while the environment is torn down.
      const doomed = new Sandbox({ isolation: "process", partition: "doomed" });
      doomed.defineFunction("killMyHelper", () => process.kill(doomed.processId, "SIGKILL"));
      try { doomed.evalSync("killMyHelper(); while (true) {}"); } catch {}
    `;
    for (let i = 0; i < 8; i++) {
      const run = spawnSync(process.execPath, ["--input-type=module", "-e", script], { encoding: "utf8" });
      expect({ status: run.status, signal: run.signal, stderr: run.stderr }).toEqual({
        status: 0,
        signal: null,
        stderr: "",
      });
    }
  });
});
