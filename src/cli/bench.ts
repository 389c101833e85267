/**
 * `quickjs-native bench`: the quick benchmark of the repository's bench/ package. The peers it
 * compares against are heavy, so they live in bench/'s own dependencies, installed on demand.
 */
import { spawnSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

export const BENCH_HELP = `Usage: quickjs-native bench

Runs the quick benchmark (npm run bench:quick): this engine against WASM QuickJS builds,
@langchain/quickjs and isolated-vm on identical workloads. Needs a clone of the repository
with the benchmark dependencies installed (cd bench && npm install).`;

/** Runs the `bench` command from the package root; resolves to the process exit code. */
export function benchCommand(argv: string[], packageRoot: string): number {
  if (argv.includes("-h") || argv.includes("--help")) {
    process.stdout.write(`${BENCH_HELP}\n`);
    return 0;
  }
  const bench = join(packageRoot, "bench");
  if (!existsSync(join(bench, "run.js"))) {
    process.stderr.write(
      [
        "The benchmark suite is not part of the npm package. To run it:",
        "  git clone <this repository> && cd quickjs-native",
        "  npm install && (cd bench && npm install)",
        "  npx quickjs-native bench        # or: npm run bench:quick",
        "",
      ].join("\n"),
    );
    return 1;
  }
  if (!existsSync(join(bench, "node_modules"))) {
    process.stderr.write(
      [
        "The benchmark dependencies (the peer engines) are not installed. Install them once with:",
        `  cd ${bench} && npm install`,
        "then run `quickjs-native bench` again (or `npm run bench:quick` from the repository root).",
        "",
      ].join("\n"),
    );
    return 1;
  }
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const r = spawnSync(npm, ["run", "bench:quick"], { cwd: packageRoot, stdio: "inherit" });
  if (r.error) {
    process.stderr.write(`could not start npm: ${r.error.message}\n`);
    return 1;
  }
  return r.status ?? 1;
}
