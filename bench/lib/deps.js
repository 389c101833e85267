// Installs bench/'s own dependencies (npm ci against the committed lock file) when they are
// missing or stale, so `npm ci && npm run bench` works on a fresh clone.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import { existsSync, readFileSync, writeFileSync } from "node:fs";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const bench = fileURLToPath(new URL("../", import.meta.url));
const stampPath = `${bench}node_modules/.bench-lock-stamp`;

function lockHash() {
  return createHash("sha256")
    .update(readFileSync(`${bench}package-lock.json`))
    .digest("hex");
}

/**
 * Environment for npm in bench/. Under `npm run bench` the parent npm exports its project's
 * location (npm_config_local_prefix), which would point this install at the repository root:
 * drop what npm run injects. Native addons (isolated-vm) build against the local Node headers.
 */
function npmEnv() {
  const env = { ...process.env };
  for (const key of Object.keys(env)) {
    if (key === "npm_config_local_prefix" || key === "npm_package_json" || key === "INIT_CWD") delete env[key];
    else if (key.startsWith("npm_lifecycle_") || key === "npm_command") delete env[key];
    else if (key === "npm_config_allow_scripts" && env[key] === "") delete env[key];
  }
  const prefix = dirname(dirname(process.execPath));
  if (!env.npm_config_nodedir && existsSync(join(prefix, "include/node/common.gypi"))) env.npm_config_nodedir = prefix;
  return env;
}

function npmCi(extraArgs, say) {
  const npm = process.platform === "win32" ? "npm.cmd" : "npm";
  const result = spawnSync(npm, ["ci", "--no-audit", "--no-fund", ...extraArgs], {
    cwd: bench,
    env: npmEnv(),
    stdio: ["ignore", "inherit", "inherit"],
  });
  if (result.error) say(`npm ci failed to start: ${result.error.message}`);
  return result.status === 0;
}

/**
 * Makes bench/node_modules match bench/package-lock.json. When a native build fails (an
 * engine's addon), installs without scripts so the other engines still run; the affected
 * engine then reports why it cannot load.
 */
/**
 * True when bench/node_modules already holds every package of the lock file at its locked
 * version, as after a plain `npm install` in bench/ (which writes no stamp).
 */
function installedAsLocked() {
  const lock = JSON.parse(readFileSync(`${bench}package-lock.json`, "utf8"));
  return Object.entries(lock.packages ?? {}).every(([path, entry]) => {
    if (path === "" || entry.optional || entry.link) return true;
    const manifest = `${bench}${path}/package.json`;
    return existsSync(manifest) && JSON.parse(readFileSync(manifest, "utf8")).version === entry.version;
  });
}

export function ensureBenchDeps(say) {
  const want = lockHash();
  if (existsSync(stampPath) && readFileSync(stampPath, "utf8") === want) return;
  if (existsSync(`${bench}node_modules`) && installedAsLocked()) {
    writeFileSync(stampPath, want);
    return;
  }
  say("installing bench dependencies (npm ci in bench/; compiles isolated-vm, about a minute)");
  if (!npmCi([], say)) {
    say("npm ci failed; retrying without install scripts (engines needing a native build will report it)");
    if (!npmCi(["--ignore-scripts"], say)) throw new Error("npm ci in bench/ failed");
  }
  writeFileSync(stampPath, want);
}
