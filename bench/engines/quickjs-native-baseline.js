// quickjs-native built from another checkout (`node bench/run.js --baseline=PATH`), run beside this
// checkout's build so that a change's cost is a ratio measured in one run, not two runs' ratios to
// a reference engine that itself moves between runs.
import { execFileSync } from "node:child_process";
import { resolve } from "node:path";
import { BASELINE_ENV } from "./index.js";
import { nativeAdapter } from "./quickjs-native.js";

const root = `${resolve(process.env[BASELINE_ENV] ?? ".")}/`;

/** The baseline checkout's commit, for its label; "unknown commit" when it is not a git checkout. */
function commitOf(dir) {
  try {
    return execFileSync("git", ["-C", dir, "rev-parse", "--short", "HEAD"], {
      encoding: "utf8",
      stdio: ["ignore", "pipe", "ignore"],
    }).trim();
  } catch {
    return "unknown commit";
  }
}

const commit = commitOf(root);

export default nativeAdapter({
  id: "quickjs-native-baseline",
  label: `quickjs-native baseline (${commit})`,
  root,
  checkout: `baseline checkout at ${commit}`,
});
