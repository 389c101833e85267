// Builds the addon for this machine and stores it where node-gyp-build looks for prebuilt
// binaries: prebuilds/<platform>-<arch>/quickjs-native.napi[.<libc>].node. The addon only uses
// Node-API (NAPI_VERSION 8), so one binary serves every Node release >= 20 on this platform.
// Runs from `npm run prebuild` and from `prepack`, so every packed tarball carries a binary
// and the pristine QuickJS-ng sources a source build needs.
//
//   node scripts/prebuild.js            build (incrementally, in build/) and copy
//   node scripts/prebuild.js --clean    drop prebuilds/ first (only this machine's binary remains)
import { spawnSync } from "node:child_process";
import { copyFileSync, existsSync, mkdirSync, rmSync, statSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);

/** The libc tag node-gyp-build matches on Linux (it reads /etc/alpine-release the same way). */
function libcTag() {
  if (process.platform !== "linux") return undefined;
  return existsSync("/etc/alpine-release") ? "musl" : "glibc";
}

/** File name node-gyp-build's parseTags understands: unknown leading parts are ignored, `napi` and the libc are tags. */
function prebuildPath(platform = process.platform, arch = process.arch, libc = libcTag()) {
  const tags = ["quickjs-native", "napi", ...(libc ? [libc] : []), "node"];
  return join("prebuilds", `${platform}-${arch}`, tags.join("."));
}

function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit" });
  if (r.status !== 0) {
    console.error(`prebuild: \`${cmd} ${args.join(" ")}\` failed`);
    process.exit(r.status ?? 1);
  }
}

function main() {
  if (process.argv.includes("--clean")) rmSync(join(root, "prebuilds"), { recursive: true, force: true });

  // Also (re)creates deps/quickjs-ng-src, the pristine copy the tarball ships for source builds.
  run("bash", ["deps/fetch-quickjs.sh"]);
  if (!existsSync(join(root, "deps/quickjs-ng-src/quickjs.c"))) {
    console.error("prebuild: deps/quickjs-ng-src is missing after fetch-quickjs.sh; the tarball could not build from source");
    process.exit(1);
  }
  // Same directory and flags as `npm run build:native`, so a tree that was just built is not rebuilt.
  run(process.execPath, [require.resolve("cmake-js/bin/cmake-js"), "compile", "--CDCMAKE_BUILD_TYPE=Release"]);

  const built = join(root, "build/Release/quickjs_native.node");
  const target = join(root, prebuildPath());
  mkdirSync(dirname(target), { recursive: true });
  copyFileSync(built, target);
  // Symbols are dead weight in a shipped binary; a missing strip only costs size.
  if (process.platform !== "win32") {
    const s = spawnSync("strip", ["--strip-unneeded", target], { stdio: "ignore" });
    if (s.status !== 0) console.warn("prebuild: strip unavailable; shipping an unstripped binary");
  }

  // Prove the copy loads through the same resolution the package uses at run time. LD_BIND_NOW
  // makes the loader resolve every symbol up front: an addon linked against a stale engine
  // library would otherwise load fine and die at its first call.
  const resolved = spawnSync(process.execPath, ["-e",
    "const p=require('node-gyp-build').path(process.argv[1]);require(p);console.log(p)", root],
    { cwd: root, encoding: "utf8", env: { ...process.env, PREBUILDS_ONLY: "1", LD_BIND_NOW: "1" } });
  if (resolved.status !== 0 || resolved.stdout.trim() !== target) {
    console.error(`prebuild: node-gyp-build does not resolve ${relative(root, target)}:\n${resolved.stderr}${resolved.stdout}`);
    process.exit(1);
  }
  console.log(`prebuild: ${relative(root, target)} (${(statSync(target).size / 1024).toFixed(0)} KiB)`);
}

main();
