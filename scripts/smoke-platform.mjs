// Smoke test of an installed quickjs-native on whatever Node runs it (scripts/test-platforms.sh
// runs it on Linux x64 in a Debian bullseye root, on arm64 under qemu, on Windows under wine, and
// on Node 20, 22 and 24). Copy it into a project that has the package installed, then:
//   node smoke-platform.mjs <expected prebuild dir, e.g. prebuilds/linux-arm64> [--emulator <name>]
// `--emulator qemu-user`: Node runs under that emulator, where the process tier's helper cannot
// confine itself (qemu-user refuses seccomp filters): its sandboxes pass allowUnconfined: true, and
// the test checks that without it they are refused. QUICKJS_NATIVE_HELPER may name a wrapper that
// starts the helper through the emulator.
// Prints one line per check, "skip" lines for what the platform does not have, and
// "N passed, N failed, N skipped"; exits 1 on any failure.
import { existsSync, readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { Sandbox, SandboxError } from "quickjs-native";

const expectedBinaryDir = process.argv[2];
const emulatorAt = process.argv.indexOf("--emulator");
const emulator = emulatorAt > 0 ? process.argv[emulatorAt + 1] : undefined;
let passed = 0;
let failed = 0;
let skipped = 0;
let binaryPath; // the addon node-gyp-build picked, absolute

function skip(name, why) {
  skipped++;
  console.log(`skip ${name}: skipped: ${why}`);
}

async function check(name, body) {
  try {
    const detail = await body();
    passed++;
    console.log(`ok   ${name}${detail ? `: ${detail}` : ""}`);
  } catch (err) {
    failed++;
    console.log(`FAIL ${name}: ${err instanceof Error ? err.message : String(err)}`);
  }
}

/**
 * Runs `code` in a fresh 16 MiB sandbox and returns the SandboxError code it failed with. The
 * time budget is generous unless the timeout is what is tested: under emulation (qemu, wine)
 * filling 16 MiB takes seconds.
 */
function failureCode(code, executionTimeoutMs, tier = {}) {
  const sb = new Sandbox({ memoryLimitBytes: 16 * 1024 * 1024, executionTimeoutMs, ...tier });
  try {
    sb.evalSync(code);
    return "no error";
  } catch (err) {
    if (err instanceof SandboxError) return err.code;
    throw err;
  } finally {
    sb.dispose();
  }
}

function expectCode(code, wanted, tier) {
  const got = failureCode(code, wanted === "TIMEOUT" ? 500 : 60_000, tier);
  if (got !== wanted) throw new Error(`expected ${wanted}, got ${got}`);
  return got;
}

console.log(`node ${process.version} ${process.platform}-${process.arch}, Node-API ${process.versions.napi}`);

await check("loads the prebuilt binary", () => {
  const require = createRequire(import.meta.url);
  const pkg = require.resolve("quickjs-native/package.json").replace(/package\.json$/, "");
  binaryPath = require("node-gyp-build").path(pkg);
  const binary = binaryPath.slice(pkg.length).replaceAll("\\", "/");
  if (expectedBinaryDir && !binary.startsWith(`${expectedBinaryDir}/`)) throw new Error(`loaded ${binary}`);
  return binary;
});

await check("evaluates [1,2,3].map(x=>x*2)", () => {
  const sb = new Sandbox();
  try {
    const value = sb.evalSync("[1,2,3].map(x=>x*2)");
    if (JSON.stringify(value) !== "[2,4,6]") throw new Error(`got ${JSON.stringify(value)}`);
    return JSON.stringify(value);
  } finally {
    sb.dispose();
  }
});

await check("an endless loop stops with TIMEOUT", () => expectCode("for (;;) {}", "TIMEOUT"));

await check("an unbounded allocation stops with OUT_OF_MEMORY", () =>
  expectCode("const keep = []; for (let i = 0; ; i++) keep.push('x'.repeat(1024) + i);", "OUT_OF_MEMORY"),
);

await check("unbounded recursion stops with STACK_OVERFLOW", () =>
  expectCode("function down(n) { return down(n + 1) + 1; } down(0);", "STACK_OVERFLOW"),
);

await check("an awaited host call returns its value", async () => {
  const sb = new Sandbox({ executionTimeoutMs: 5000 });
  try {
    sb.defineAsyncFunction("host.add", async ([a, b]) => a + b);
    const value = await sb.eval("const sum = await host.add(40, 2); sum");
    if (value !== 42) throw new Error(`got ${JSON.stringify(value)}`);
    return String(value);
  } finally {
    sb.dispose();
  }
});

// ---- the process tier (isolation: "process"): a sandbox in a helper process -------------------
await processTier();

console.log(`${passed} passed, ${failed} failed, ${skipped} skipped`);
process.exit(failed === 0 ? 0 : 1);

/** The kernel's view of a helper process ("Seccomp: 2, NoNewPrivs: 1"), or why it cannot be read. */
function kernelView(pid) {
  try {
    const status = readFileSync(`/proc/${pid}/status`, "utf8");
    const field = (name) => new RegExp(`^${name}:\\s*(\\d+)`, "m").exec(status)?.[1] ?? "?";
    return { seccomp: field("Seccomp"), noNewPrivs: field("NoNewPrivs") };
  } catch (err) {
    return { unreadable: `/proc unreadable here (${err.code ?? err})` };
  }
}

async function processTier() {
  if (process.platform === "win32") {
    skip('process tier (isolation: "process")', "no Windows helper yet");
    return;
  }
  const helper = binaryPath ? join(dirname(binaryPath), "quickjs-native-helper") : undefined;
  await check("the helper ships beside the addon", () => {
    if (!helper || !existsSync(helper)) throw new Error(`no helper at ${helper}`);
    const via = process.env.QUICKJS_NATIVE_HELPER;
    const shown = helper.slice(dirname(dirname(dirname(helper))).length + 1).replaceAll("\\", "/");
    return via ? `${shown}, started through ${via}` : shown;
  });
  const tier = { isolation: "process", partition: "smoke" };
  if (emulator) {
    console.log(
      `note process tier runs UNCONFINED under ${emulator} emulation: confinement skipped, since qemu-user cannot ` +
        "apply a seccomp filter (its seccomp system call answers ENOSYS, prctl(PR_SET_SECCOMP) EINVAL), so the " +
        "confined helper exits 70; these sandboxes pass allowUnconfined: true, which then runs it unconfined",
    );
    tier.allowUnconfined = true;
    await check("without allowUnconfined: refused, naming the confinement", () => {
      try {
        new Sandbox({ isolation: "process", partition: "smoke-refused" }).dispose();
      } catch (err) {
        if (err instanceof SandboxError && err.code === "WORKER_LOST" && /could not confine itself/.test(err.message))
          return `${err.code}: ${err.message}`;
        throw err;
      }
      throw new Error("a helper started confined under emulation");
    });
  }
  let sb;
  await check(`starts a sandbox in ${emulator ? "an unconfined" : "a confined"} helper`, () => {
    sb = new Sandbox({ ...tier, executionTimeoutMs: 60_000 });
  });
  if (!sb) return;
  try {
    await check("the helper evaluates code", () => {
      const value = sb.evalSync("[1,2,3].map(x=>x*2)");
      if (JSON.stringify(value) !== "[2,4,6]") throw new Error(`got ${JSON.stringify(value)}`);
      const pid = sb.processId;
      if (!(pid > 0) || pid === process.pid) throw new Error(`runs in process ${pid}`);
      const view = kernelView(pid);
      if (view.unreadable)
        return `helper pid ${pid}; ${view.unreadable}; ${emulator ? "unconfined" : "it serves, so it confined itself (it exits 70 otherwise)"}`;
      const confined = view.seccomp === "2" && view.noNewPrivs === "1";
      if (confined === Boolean(emulator))
        throw new Error(`helper pid ${pid} has Seccomp: ${view.seccomp}, NoNewPrivs: ${view.noNewPrivs}`);
      return `helper pid ${pid}, Seccomp: ${view.seccomp}, NoNewPrivs: ${view.noNewPrivs}`;
    });
    await check("a sync host function", () => {
      sb.defineFunction("host.twice", (n) => n * 2);
      const value = sb.evalSync("host.twice(21)");
      if (value !== 42) throw new Error(`got ${JSON.stringify(value)}`);
      return String(value);
    });
    await check("an awaited async host function", async () => {
      sb.defineAsyncFunction("host.add", async ([a, b]) => a + b);
      const value = await sb.eval("const sum = await host.add(40, 2); sum");
      if (value !== 42) throw new Error(`got ${JSON.stringify(value)}`);
      return String(value);
    });
    await check("an endless loop in the helper stops with TIMEOUT", () => expectCode("for (;;) {}", "TIMEOUT", tier));
    await check("an unbounded allocation in the helper stops with OUT_OF_MEMORY", () =>
      expectCode("const keep = []; for (let i = 0; ; i++) keep.push('x'.repeat(1024) + i);", "OUT_OF_MEMORY", tier),
    );
    await check("a snapshot restores into an in-process sandbox", () => {
      sb.evalSync("var counter = 41");
      const { sandbox } = Sandbox.restore(sb.snapshot(), { isolation: "in-process" });
      try {
        const value = sandbox.evalSync("++counter");
        if (value !== 42) throw new Error(`got ${JSON.stringify(value)}`);
        return `counter ${value}`;
      } finally {
        sandbox.dispose();
      }
    });
  } finally {
    await check("disposes: the sandbox then refuses evals with DISPOSED", () => {
      sb.dispose();
      try {
        sb.evalSync("1");
      } catch (err) {
        if (err instanceof SandboxError && err.code === "DISPOSED") return err.code;
        throw err;
      }
      throw new Error("a disposed sandbox evaluated");
    });
  }
}
