// Builds the addon and stores it where node-gyp-build looks for prebuilt binaries:
// prebuilds/<platform>-<arch>/quickjs-native.napi[.<libc>].node. The addon only uses Node-API
// (NAPI_VERSION 8), so one binary serves every Node release >= 20 on its platform.
// Runs from `npm run prebuild`, and from `prepack` (--pack), so a packed tarball carries every
// shipped binary, or this machine's when asked for, and the pristine QuickJS-ng sources a source
// build needs.
//
//   node scripts/prebuild.js                 this machine's binary (build/, as `npm run build:native`);
//                                            other platforms' binaries already in prebuilds/ are kept
//                                            only if they were built from the current sources
//   node scripts/prebuild.js --clean         drop prebuilds/ first
//   node scripts/prebuild.js --digest        prints the digest of the sources the stamps record
//   node scripts/prebuild.js --pack          `prepack`: passes when prebuilds/ holds the release set
//                                            (every target, built by --release from the current
//                                            sources) and refuses otherwise, in one line; with
//                                            QJSN_HOST_ONLY_TARBALL=1 it makes this machine's
//                                            binary instead, for a tarball that says so
//   node scripts/prebuild.js --release --root DIR [--targets linux-x64,linux-arm64,win32-x64]
//                                            the shipped binaries: Linux ones compiled inside DIR, a
//                                            Debian bullseye root (scripts/test-platforms.sh makes
//                                            one) with static libstdc++/libgcc; Windows with the
//                                            host's mingw-w64. Fails unless every Linux binary needs
//                                            no symbol above GLIBC_2.28 and no GLIBCXX/CXXABI.
import { spawnSync } from "node:child_process";
import { createHash } from "node:crypto";
import {
  copyFileSync,
  cpSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from "node:fs";
import { createRequire } from "node:module";
import { dirname, join, relative } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);

/** The oldest glibc the Linux prebuilds promise: Node 20's own official binaries need 2.28. */
const GLIBC_FLOOR = [2, 28];

const MINGW_PREFIX = "x86_64-w64-mingw32";
/**
 * Every platform we ship a binary for. `cross` are the CMake arguments that select the compiler
 * (none: the build root's native gcc); `tools` the binutils prefix for strip and objdump.
 */
const TARGETS = {
  "linux-x64": { platform: "linux", arch: "x64", libc: "glibc", inRoot: true, tools: "", cross: [] },
  "linux-arm64": {
    platform: "linux",
    arch: "arm64",
    libc: "glibc",
    inRoot: true,
    tools: "aarch64-linux-gnu-",
    cross: [
      "-DCMAKE_SYSTEM_NAME=Linux",
      "-DCMAKE_SYSTEM_PROCESSOR=aarch64",
      "-DCMAKE_C_COMPILER=aarch64-linux-gnu-gcc",
      "-DCMAKE_CXX_COMPILER=aarch64-linux-gnu-g++",
    ],
  },
  "win32-x64": {
    platform: "win32",
    arch: "x64",
    inRoot: false,
    tools: `${MINGW_PREFIX}-`,
    // The -posix compilers: std::thread and std::mutex need the winpthreads threading model.
    cross: [
      "-DCMAKE_SYSTEM_NAME=Windows",
      "-DCMAKE_SYSTEM_PROCESSOR=x86_64",
      `-DCMAKE_C_COMPILER=${MINGW_PREFIX}-gcc-posix`,
      `-DCMAKE_CXX_COMPILER=${MINGW_PREFIX}-g++-posix`,
      `-DCMAKE_RC_COMPILER=${MINGW_PREFIX}-windres`,
    ],
  },
};

/** The libc tag node-gyp-build matches on Linux (it reads /etc/alpine-release the same way). */
function hostLibc() {
  if (process.platform !== "linux") return undefined;
  return existsSync("/etc/alpine-release") ? "musl" : "glibc";
}

/** File name node-gyp-build's parseTags understands: unknown leading parts are ignored, `napi` and the libc are tags. */
function prebuildPath({ platform, arch, libc }) {
  const tags = ["quickjs-native", "napi", ...(libc ? [libc] : []), "node"];
  return join("prebuilds", `${platform}-${arch}`, tags.join("."));
}

function fail(message) {
  console.error(`prebuild: ${message}`);
  process.exit(1);
}

function run(cmd, args, options = {}) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit", ...options });
  if (r.status !== 0) fail(`\`${cmd} ${args.join(" ")}\` failed${r.error ? ` (${r.error.message})` : ""}`);
}

function filesUnder(dir) {
  return readdirSync(dir, { withFileTypes: true })
    .flatMap((e) => (e.isDirectory() ? filesUnder(join(dir, e.name)) : [join(dir, e.name)]))
    .sort();
}

/** Digest of everything a binary is built from, so a stale prebuild is never packed. */
function sourceDigest() {
  const hash = createHash("sha256");
  const inputs = [
    "CMakeLists.txt",
    "deps/quickjs-ng.lock.json",
    ...filesUnder(join(root, "native")).map((f) => relative(root, f)),
    ...filesUnder(join(root, "deps/patches")).map((f) => relative(root, f)),
  ];
  for (const file of inputs)
    hash
      .update(file)
      .update("\0")
      .update(readFileSync(join(root, file)));
  return hash.digest("hex");
}

const stampDir = join(root, "build-prebuild", "stamps");
const stampOf = (name) => join(stampDir, name);
const isFresh = (name, digest) => existsSync(stampOf(name)) && readFileSync(stampOf(name), "utf8") === digest;
/** A binary made by --release (not on this machine's toolchain) from these sources. */
const releaseStampOf = (name) => stampOf(`${name}.release`);
const isRelease = (name, digest) =>
  existsSync(releaseStampOf(name)) && readFileSync(releaseStampOf(name), "utf8") === digest;

/** The targets whose shipped binary is missing from prebuilds/ or was not built by --release from `digest`'s sources. */
function missingReleaseTargets(digest) {
  return Object.entries(TARGETS)
    .filter(([name, target]) => !existsSync(join(root, prebuildPath(target))) || !isRelease(name, digest))
    .map(([name]) => name);
}

/** The highest GLIBC_x.y version the binary needs, and any C++ runtime versions it needs. */
function symbolVersions(binutils, file) {
  const r = binutils("objdump", ["-T"], file);
  if (r.status !== 0) fail(`objdump -T ${file} failed${r.error ? ` (${r.error.message})` : ""}`);
  let glibc = [0, 0];
  let glibcSymbol = "";
  const cxx = new Set();
  for (const line of r.stdout.split("\n")) {
    const m = /\b(GLIBC|GLIBCXX|CXXABI)_([0-9.]+)\)?\s+(\S+)\s*$/.exec(line);
    if (!m) continue;
    if (m[1] !== "GLIBC") {
      cxx.add(`${m[1]}_${m[2]}`);
      continue;
    }
    const v = m[2].split(".").map(Number);
    if (v[0] > glibc[0] || (v[0] === glibc[0] && (v[1] ?? 0) > glibc[1])) {
      glibc = [v[0], v[1] ?? 0];
      glibcSymbol = m[3];
    }
  }
  return { glibc, glibcSymbol, cxx: [...cxx] };
}

/** Reports a Linux binary's glibc and libstdc++ needs; fatal in a release build when above the floor. */
function checkPortability(binutils, file, fatal) {
  const { glibc, glibcSymbol, cxx } = symbolVersions(binutils, file);
  const aboveFloor = glibc[0] > GLIBC_FLOOR[0] || (glibc[0] === GLIBC_FLOOR[0] && glibc[1] > GLIBC_FLOOR[1]);
  const summary = `needs glibc ${glibc.join(".")} (${glibcSymbol})${cxx.length ? `, ${cxx.join(" ")}` : ", no libstdc++"}`;
  if (!aboveFloor && cxx.length === 0) return summary;
  const problem = `${relative(root, file)} ${summary}; the floor is glibc ${GLIBC_FLOOR.join(".")} with libstdc++ linked in`;
  if (fatal) fail(problem);
  console.warn(
    `prebuild: note: ${problem}. Fine for this machine; shipped binaries come from --release (see scripts/test-platforms.sh).`,
  );
  return summary;
}

function headerDirs() {
  return {
    nodeApi: require("node-api-headers").include_dir,
    nodeApiDef: require("node-api-headers").def_paths.node_api_def,
    addonApi: require("node-addon-api").include_dir,
  };
}

/** The host binary, built the way `npm run build:native` builds it (so a fresh tree is not rebuilt). */
function buildHost() {
  run(process.execPath, [require.resolve("cmake-js/bin/cmake-js"), "compile", "--CDCMAKE_BUILD_TYPE=Release"]);
  return join(root, "build/Release/quickjs_native.node");
}

/**
 * A Linux binary built inside `buildRoot` (a Debian bullseye tree entered with chroot): the inputs
 * are copied in with their times kept, so a second run only rebuilds what changed.
 */
function buildInRoot(name, target, buildRoot) {
  const inside = "/qjsn";
  const src = join(buildRoot, "qjsn/src");
  const h = headerDirs();
  mkdirSync(src, { recursive: true });
  for (const part of ["CMakeLists.txt", "native", "deps/quickjs-ng"]) {
    cpSync(join(root, part), join(src, part), { recursive: true, preserveTimestamps: true });
  }
  cpSync(h.nodeApi, join(src, "headers/node-api"), { recursive: true, preserveTimestamps: true });
  cpSync(h.addonApi, join(src, "headers/node-addon-api"), { recursive: true, preserveTimestamps: true });
  const build = `${inside}/build-${name}`;
  run(
    "chroot",
    [
      buildRoot,
      "cmake",
      "-S",
      `${inside}/src`,
      "-B",
      build,
      "-DCMAKE_BUILD_TYPE=Release",
      "-DQJSN_PORTABLE=ON",
      `-DCMAKE_JS_INC=${inside}/src/headers/node-api`,
      `-DNODE_ADDON_API_DIR=${inside}/src/headers/node-addon-api`,
      ...target.cross,
    ],
    {
      env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", HOME: "/root", LANG: "C" },
      stdio: ["ignore", "ignore", "inherit"],
    },
  );
  run("chroot", [buildRoot, "cmake", "--build", build, "--", "-j2"], {
    env: { PATH: "/usr/sbin:/usr/bin:/sbin:/bin", HOME: "/root", LANG: "C" },
    stdio: ["ignore", "ignore", "inherit"],
  });
  return join(buildRoot, build.slice(1), "quickjs_native.node");
}

/** The Windows binary, cross-compiled with the host's mingw-w64 (winpthreads linked in). */
function buildWindows(target) {
  const h = headerDirs();
  const build = join(root, "build-prebuild", "win32-x64");
  run(
    "cmake",
    [
      "-S",
      root,
      "-B",
      build,
      "-DCMAKE_BUILD_TYPE=Release",
      "-DQJSN_PORTABLE=ON",
      `-DCMAKE_JS_INC=${h.nodeApi}`,
      `-DNODE_ADDON_API_DIR=${h.addonApi}`,
      `-DNODE_API_DEF=${h.nodeApiDef}`,
      ...target.cross,
    ],
    { stdio: ["ignore", "ignore", "inherit"] },
  );
  run("cmake", ["--build", build, "--", "-j2"], { stdio: ["ignore", "ignore", "inherit"] });
  return join(build, "quickjs_native.node");
}

/**
 * Runs the target's binutils `tool` on a binary: inside the build root for the binaries made
 * there (the cross binutils live there), else on this machine. Returns spawnSync's result.
 */
function binutilsFor(target, buildRoot) {
  return (tool, args, file) => {
    if (!target.inRoot || !buildRoot) return spawnSync(`${target.tools}${tool}`, [...args, file], { encoding: "utf8" });
    const staged = join(buildRoot, "qjsn/stage.node");
    copyFileSync(file, staged);
    const r = spawnSync("chroot", [buildRoot, `${target.tools}${tool}`, ...args, "/qjsn/stage.node"], {
      encoding: "utf8",
    });
    copyFileSync(staged, file);
    return r;
  };
}

function install(name, target, built, digest, release, buildRoot) {
  const dest = join(root, prebuildPath(target));
  mkdirSync(dirname(dest), { recursive: true });
  copyFileSync(built, dest);
  // The process tier's helper executable, built beside the addon (Linux targets; not Windows yet),
  // ships beside it: src/process-tier/ looks for it next to the addon it loaded.
  const helper = join(dirname(built), "quickjs-native-helper");
  if (existsSync(helper)) copyFileSync(helper, join(dirname(dest), "quickjs-native-helper"));
  const binutils = binutilsFor(target, buildRoot);
  // Symbols are dead weight in a shipped binary; a missing strip only costs size.
  if (binutils("strip", ["--strip-unneeded"], dest).status !== 0) {
    console.warn(`prebuild: ${target.tools}strip unavailable; shipping an unstripped binary`);
  }
  const needs = target.platform === "linux" ? `, ${checkPortability(binutils, dest, release)}` : "";
  mkdirSync(stampDir, { recursive: true });
  writeFileSync(stampOf(name), digest);
  if (release) writeFileSync(releaseStampOf(name), digest);
  else rmSync(releaseStampOf(name), { force: true });
  console.log(`prebuild: ${relative(root, dest)} (${(statSync(dest).size / 1024).toFixed(0)} KiB${needs})`);
  return dest;
}

/**
 * Proves the host binary loads through the same resolution the package uses at run time.
 * LD_BIND_NOW makes the loader resolve every symbol up front: an addon linked against a stale
 * engine library would otherwise load fine and die at its first call.
 */
function checkHostResolution(expected) {
  const resolved = spawnSync(
    process.execPath,
    ["-e", "const p=require('node-gyp-build').path(process.argv[1]);require(p);console.log(p)", root],
    { cwd: root, encoding: "utf8", env: { ...process.env, PREBUILDS_ONLY: "1", LD_BIND_NOW: "1" } },
  );
  if (resolved.status !== 0 || resolved.stdout.trim() !== expected) {
    fail(`node-gyp-build does not resolve ${relative(root, expected)}:\n${resolved.stderr}${resolved.stdout}`);
  }
}

function option(flag) {
  const i = process.argv.indexOf(flag);
  return i >= 0 ? process.argv[i + 1] : undefined;
}

function main() {
  if (process.argv.includes("--digest")) {
    console.log(sourceDigest()); // what the stamps record
    return;
  }
  if (process.argv.includes("--pack") && !/^(1|true)$/i.test(process.env.QJSN_HOST_ONLY_TARBALL ?? "")) {
    // A tarball packed here would otherwise ship this machine's binary alone, silently.
    const missing = missingReleaseTargets(sourceDigest());
    if (missing.length > 0) {
      fail(
        `refusing to pack without the release binaries (${missing.join(", ")} missing or stale): run \`bash scripts/test-platforms.sh\`, or set QJSN_HOST_ONLY_TARBALL=1 for a tarball with this machine's binary only`,
      );
    }
    console.log(`prebuild: prebuilds/ holds the release set (${Object.keys(TARGETS).join(", ")})`);
    run("bash", ["deps/fetch-quickjs.sh"]);
    return;
  }
  const release = process.argv.includes("--release");
  const buildRoot = option("--root");
  const hostName = `${process.platform}-${process.arch}`;
  const wanted = release ? (option("--targets") ?? Object.keys(TARGETS).join(",")).split(",") : [hostName];
  for (const name of wanted)
    if (release && !TARGETS[name]) fail(`unknown target ${name} (known: ${Object.keys(TARGETS).join(", ")})`);
  if (release && wanted.some((n) => TARGETS[n].inRoot) && !(buildRoot && existsSync(join(buildRoot, "usr/bin/g++")))) {
    fail(
      "--release builds the Linux binaries inside a Debian bullseye root: pass --root DIR (scripts/test-platforms.sh makes one)",
    );
  }
  if (process.argv.includes("--clean")) {
    rmSync(join(root, "prebuilds"), { recursive: true, force: true });
    rmSync(stampDir, { recursive: true, force: true });
  }

  // Also (re)creates deps/quickjs-ng-src, the pristine copy the tarball ships for source builds.
  run("bash", ["deps/fetch-quickjs.sh"]);
  if (!existsSync(join(root, "deps/quickjs-ng-src/quickjs.c"))) {
    fail("deps/quickjs-ng-src is missing after fetch-quickjs.sh; the tarball could not build from source");
  }
  const digest = sourceDigest();

  for (const name of wanted) {
    const target = TARGETS[name] ?? { platform: process.platform, arch: process.arch, tools: "" };
    if (
      !release &&
      name === hostName &&
      isFresh(name, digest) &&
      existsSync(join(root, prebuildPath({ ...target, libc: hostLibc() })))
    ) {
      // A release build of this platform made from the same sources is better than a host build.
      console.log(`prebuild: ${prebuildPath({ ...target, libc: hostLibc() })} is up to date`);
      continue;
    }
    const built = !release ? buildHost() : target.inRoot ? buildInRoot(name, target, buildRoot) : buildWindows(target);
    const dest = install(
      name,
      release ? target : { ...target, libc: hostLibc() },
      built,
      digest,
      release,
      release ? buildRoot : undefined,
    );
    if (name === hostName) checkHostResolution(dest);
  }

  // Another platform's binary left from an earlier release build must match today's sources.
  if (existsSync(join(root, "prebuilds"))) {
    for (const dir of readdirSync(join(root, "prebuilds"))) {
      if (!isFresh(dir, digest)) {
        fail(
          `prebuilds/${dir} was built from other sources: rebuild it (node scripts/prebuild.js --release ...) or drop it (--clean)`,
        );
      }
    }
  }
}

main();
