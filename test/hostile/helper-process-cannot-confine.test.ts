// A helper that cannot confine itself (a kernel without seccomp; qemu-user, whose prctl and seccomp
// refuse a filter) exits 70 before it serves. On Linux the pool then refuses the sandbox with a
// typed error naming the confinement, unless the sandbox was created with allowUnconfined: true,
// which runs it in an unconfined helper instead. The helper here is a wrapper (QUICKJS_NATIVE_HELPER)
// that exits 70 when asked to confine itself, as the real one does when confine() fails, and runs
// the real helper otherwise; where qemu-user is installed, the real helper also runs under it.
import { chmodSync, existsSync, mkdtempSync, readFileSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { afterAll, afterEach, beforeAll, describe, expect, it } from "vitest";
import { configureProcessPool, PROCESS_POOL_DEFAULTS, Sandbox, SandboxError } from "../../src/index.js";
import { addonDirectory } from "../../src/native.js";
import { fakeHelper, withHelper } from "./fake-helper.js";

const linux = process.platform === "linux";
// The cases that run the real helper are left to the plain run under the sanitizers
// (scripts/test-sanitize.js sets QJSN_SANITIZED), as the other helper-process tests do.
const realHelper = process.env.QJSN_SANITIZED !== "1";
// qemu-user, where present (scripts/test-platforms.sh installs it): the real helper under it.
const qemu = `/usr/bin/qemu-${process.arch === "arm64" ? "aarch64" : "x86_64"}`;
const dir = mkdtempSync(join(tmpdir(), "qjsn-cannot-confine-"));

/** A wrapper named `name`: exits 70 when asked to confine, counting those starts in `<name>.log`. */
function cannotConfine(name: string): { path: string; confinedStarts: () => number } {
  const path = join(dir, name);
  const log = `${path}.log`;
  writeFileSync(log, "");
  writeFileSync(
    path,
    `#!/bin/sh\nif [ "$2" = confined ]; then echo start >> '${log}'; exit 70; fi\nexec '${join(addonDirectory, "quickjs-native-helper")}' "$@"\n`,
  );
  chmodSync(path, 0o755);
  return { path, confinedStarts: () => readFileSync(log, "utf8").split("\n").length - 1 };
}

/** The kernel's view of a helper: its seccomp mode (0 none, 2 filter). */
function seccompMode(pid: number): number {
  const status = readFileSync(`/proc/${pid}/status`, "utf8");
  return Number(/^Seccomp:\s*(\d+)/m.exec(status)?.[1]);
}

const opened: Sandbox[] = [];
const warnings: string[] = [];
const onWarning = (w: Error & { code?: string }) => {
  if (w.code === "QUICKJS_NATIVE_UNCONFINED") warnings.push(w.message);
};
// No warm helpers unless a test asks: a warm helper of the real executable would host the sandboxes.
beforeAll(() => {
  configureProcessPool({ min: 0 });
  process.on("warning", onWarning);
});
afterAll(() => {
  process.off("warning", onWarning);
  configureProcessPool({ min: PROCESS_POOL_DEFAULTS.min });
});
afterEach(() => {
  for (const s of opened.splice(0)) s.dispose();
});

function processSandbox(helper: string, options: { partition: string; allowUnconfined?: boolean }): Sandbox {
  const s = withHelper(helper, () => new Sandbox({ isolation: "process", ...options }));
  opened.push(s);
  return s;
}

describe.skipIf(!linux)("a helper that cannot confine itself", () => {
  it("without allowUnconfined: refused with WORKER_LOST naming the confinement, every time", () => {
    const { path } = cannotConfine("refused");
    for (let i = 0; i < 2; i++) {
      let caught: unknown;
      try {
        processSandbox(path, { partition: "refused" });
      } catch (err) {
        caught = err;
      }
      expect(caught).toBeInstanceOf(SandboxError);
      expect(caught).toMatchObject({
        code: "WORKER_LOST",
        message: expect.stringMatching(/could not confine itself.*allowUnconfined: true/),
      });
    }
  });

  it.runIf(realHelper)("with allowUnconfined: the sandbox works, in a helper without a seccomp filter", async () => {
    const { path } = cannotConfine("allowed");
    const s = processSandbox(path, { partition: "allowed", allowUnconfined: true });
    s.defineFunction("host.twice", (n) => (n as number) * 2);
    expect(s.evalSync("host.twice(21)")).toBe(42);
    expect(await s.eval("6 * 7")).toBe(42);
    expect(seccompMode(s.processId!)).toBe(0);
    await new Promise((resolve) => setImmediate(resolve)); // warnings are emitted on the next tick
    expect(warnings.filter((w) => w.includes(path))).toHaveLength(1);
  });

  it.runIf(realHelper)(
    "once learned: unconfined helpers for those that allow it, never for those that do not (same partition)",
    () => {
      const { path, confinedStarts } = cannotConfine("learned");
      expect(() => processSandbox(path, { partition: "shared" })).toThrow(/could not confine itself/);
      const starts = confinedStarts();
      const loose = processSandbox(path, { partition: "shared", allowUnconfined: true });
      expect(loose.evalSync("1 + 1")).toBe(2);
      expect(confinedStarts()).toBe(starts); // known: no confined helper tried for it
      // A sandbox without allowUnconfined is not placed in the unconfined helper of its partition.
      expect(() => processSandbox(path, { partition: "shared" })).toThrow(/could not confine itself/);
      expect(confinedStarts()).toBe(starts + 1);
    },
  );

  it("no confined helpers are kept warm once they are known to fail (they would be respawned without end)", async () => {
    configureProcessPool({ min: 2 });
    const { path, confinedStarts } = cannotConfine("warm");
    expect(() => processSandbox(path, { partition: "warm" })).toThrow(/could not confine itself/);
    // The refill runs on the next turns, with the same helper path in force while it is set.
    const saved = process.env.QUICKJS_NATIVE_HELPER;
    process.env.QUICKJS_NATIVE_HELPER = path;
    try {
      await new Promise((resolve) => setTimeout(resolve, 300));
      const after = confinedStarts();
      await new Promise((resolve) => setTimeout(resolve, 300));
      expect(confinedStarts()).toBe(after);
      expect(after).toBeLessThanOrEqual(3);
    } finally {
      if (saved === undefined) delete process.env.QUICKJS_NATIVE_HELPER;
      else process.env.QUICKJS_NATIVE_HELPER = saved;
      configureProcessPool({ min: 0 });
    }
  });

  it("a helper that served and then exits with that code teaches nothing (its guest may have chosen the code)", async () => {
    const log = join(dir, "served.log");
    writeFileSync(log, "");
    // Answers Create, then notes how it was started and exits 70 at the first eval.
    const path = fakeHelper(
      "served-then-70",
      `fs.appendFileSync(${JSON.stringify(log)}, process.argv[3] + "\\n"); process.exit(70);`,
    );
    for (let i = 0; i < 2; i++) {
      const s = processSandbox(path, { partition: `served-${i}`, allowUnconfined: true });
      expect(() => s.evalSync("1")).toThrow(expect.objectContaining({ code: "WORKER_LOST" }));
      await new Promise((resolve) => setTimeout(resolve, 100)); // the loss reaches the pool
    }
    expect(readFileSync(log, "utf8")).toBe("confined\nconfined\n");
  });

  it.runIf(realHelper && existsSync(qemu))(
    "the real helper under qemu-user: exits 70 when asked to confine, serves unconfined with allowUnconfined",
    () => {
      const path = join(dir, "under-qemu");
      writeFileSync(path, `#!/bin/sh\nexec '${qemu}' '${join(addonDirectory, "quickjs-native-helper")}' "$@"\n`);
      chmodSync(path, 0o755);
      expect(() => processSandbox(path, { partition: "qemu" })).toThrow(
        expect.objectContaining({ code: "WORKER_LOST", message: expect.stringContaining("could not confine itself") }),
      );
      const s = processSandbox(path, { partition: "qemu", allowUnconfined: true });
      expect(s.evalSync("[1, 2, 3].map((x) => x * 2)")).toEqual([2, 4, 6]);
      expect(seccompMode(s.processId!)).toBe(0);
    },
  );
});
