// Smoke test of an installed quickjs-native on whatever Node runs it (scripts/test-platforms.sh
// runs it on Linux x64 in a Debian bullseye root, on arm64 under qemu, on Windows under wine, and
// on Node 20, 22 and 24). Copy it into a project that has the package installed, then:
//   node smoke-platform.mjs <expected prebuild dir, e.g. prebuilds/linux-arm64>
// Prints one line per check and "N passed, N failed"; exits 1 on any failure.
import { createRequire } from "node:module";
import { Sandbox, SandboxError } from "quickjs-native";

const expectedBinaryDir = process.argv[2];
let passed = 0;
let failed = 0;

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
function failureCode(code, executionTimeoutMs) {
  const sb = new Sandbox({ memoryLimitBytes: 16 * 1024 * 1024, executionTimeoutMs });
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

function expectCode(code, wanted) {
  const got = failureCode(code, wanted === "TIMEOUT" ? 500 : 60_000);
  if (got !== wanted) throw new Error(`expected ${wanted}, got ${got}`);
  return got;
}

console.log(`node ${process.version} ${process.platform}-${process.arch}, Node-API ${process.versions.napi}`);

await check("loads the prebuilt binary", () => {
  const require = createRequire(import.meta.url);
  const pkg = require.resolve("quickjs-native/package.json").replace(/package\.json$/, "");
  const binary = require("node-gyp-build").path(pkg).slice(pkg.length).replaceAll("\\", "/");
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

console.log(`${passed} passed, ${failed} failed`);
process.exit(failed === 0 ? 0 : 1);
