// Runs the test suite against an AddressSanitizer + UndefinedBehaviorSanitizer build of the addon
// and engine (debug build: QuickJS's own assertions, including its leak check in JS_FreeRuntime,
// are on). Node itself is not instrumented, so the ASan runtime is preloaded.
import { execFileSync, spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const binary = join(root, "build-sanitize", "Debug", "quickjs_native.node");
const cmakeJs = join(root, "node_modules", "cmake-js", "bin", "cmake-js");

// The build prints nothing but errors (and takes about a minute from scratch): say what is happening.
console.log(
  "test:sanitize: building the addon with AddressSanitizer + UndefinedBehaviorSanitizer in build-sanitize/ (about a minute the first time)",
);
const build = spawnSync(
  process.execPath,
  [cmakeJs, "compile", "--debug", "--out", "build-sanitize", "--CDQJSN_SANITIZE=ON"],
  {
    cwd: root,
    stdio: ["ignore", "ignore", "inherit"],
  },
);
if (build.status !== 0 || !existsSync(binary)) {
  console.error("test:sanitize: the sanitizer build failed");
  process.exit(1);
}

const compiler = process.env.CC || "gcc";
const asan = execFileSync(compiler, ["-print-file-name=libasan.so"], { encoding: "utf8" }).trim();
const env = {
  ...process.env,
  LD_PRELOAD: asan,
  // Node's own allocations are never freed at exit; leaks are checked by the engine's assertions.
  ASAN_OPTIONS: "detect_leaks=0:abort_on_error=1:halt_on_error=1",
  UBSAN_OPTIONS: "print_stacktrace=1:halt_on_error=1",
  QUICKJS_NATIVE_BINARY: binary,
  QJSN_SANITIZED: "1",
};
const args = process.argv.slice(2);
// Instrumented code runs several times slower: give each test more time than the plain run does.
const run = spawnSync(
  process.execPath,
  // The in-process tier only: a helper process built with the sanitizers makes system calls
  // (sigaltstack, report files) that its seccomp filter refuses.
  [join(root, "node_modules", "vitest", "vitest.mjs"), "run", "--project=in-process", "--testTimeout=120000", ...args],
  {
    cwd: root,
    env,
    stdio: "inherit",
  },
);
process.exit(run.status ?? 1);
