// npm install hook: use a prebuilt addon when one matches this platform, otherwise build from
// source. The package must also work when this script never runs (pnpm, bun, npm's install-script
// approval): src/native.ts finds prebuilds at load time on its own.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const forced =
  /^(1|true)$/i.test(process.env.npm_config_build_from_source ?? "") ||
  process.env.npm_config_build_from_source === "quickjs-native";

let unusable = "";
if (!forced) {
  let found;
  try {
    found = require("node-gyp-build").path(root);
  } catch {
    // no prebuild or earlier build matches: build below
  }
  if (found) {
    // A matching name is not enough: a prebuild made on a newer glibc/libstdc++ fails to load.
    try {
      require(found);
      process.exit(0);
    } catch (err) {
      unusable = `the prebuilt binary ${found.slice(root.length + 1)} does not load here (${String(err?.message ?? err).split("\n")[0]})`;
    }
  }
}

function run(cmd, args) {
  const r = spawnSync(cmd, args, { cwd: root, stdio: "inherit", shell: false });
  return r.status === 0;
}

console.log(
  forced
    ? "quickjs-native: building from source (requested)"
    : unusable
      ? `quickjs-native: ${unusable}; building from source`
      : `quickjs-native: no prebuilt binary for ${process.platform}-${process.arch}; building from source`,
);
/** cmake-js, where it is installed (a clone: a development dependency, as `npm run build:native` uses it). */
function cmakeJs() {
  try {
    return require.resolve("cmake-js/bin/cmake-js");
  } catch {
    return undefined;
  }
}

/**
 * The addon built by cmake itself, into build/Release where node-gyp-build looks: the Node-API
 * headers come from node-api-headers and node-addon-api, so a user's install needs no build tool
 * package of its own.
 */
function cmakeBuild() {
  const build = join(root, "build");
  const headers = require("node-api-headers");
  const args = [
    "-S",
    root,
    "-B",
    build,
    "-DCMAKE_BUILD_TYPE=Release",
    `-DCMAKE_LIBRARY_OUTPUT_DIRECTORY=${join(build, "Release")}`,
    `-DCMAKE_JS_INC=${headers.include_dir}`,
    `-DNODE_ADDON_API_DIR=${require("node-addon-api").include_dir}`,
  ];
  // Node's symbols are resolved when the addon loads (cmake-js passes the same).
  if (process.platform === "darwin") args.push("-DCMAKE_SHARED_LINKER_FLAGS=-undefined dynamic_lookup");
  if (process.platform === "win32") args.push(`-DNODE_API_DEF=${headers.def_paths.node_api_def}`);
  return run("cmake", args) && run("cmake", ["--build", build, "--config", "Release", "--parallel"]);
}

const cmakeJsBin = cmakeJs();
const ok =
  run("bash", ["deps/fetch-quickjs.sh"]) &&
  (cmakeJsBin ? run(process.execPath, [cmakeJsBin, "compile", "--CDCMAKE_BUILD_TYPE=Release"]) : cmakeBuild());
if (!ok) {
  console.error(
    [
      "",
      "quickjs-native: the source build failed.",
      "It needs: a C11/C++17 compiler (gcc >= 10 or clang >= 12), cmake >= 3.18, make or ninja, bash and patch.",
      "  Debian/Ubuntu: apt-get install build-essential cmake patch",
      "  Fedora/RHEL:   dnf install gcc-c++ make cmake patch",
      "  Alpine:        apk add build-base cmake linux-headers patch bash",
      "  macOS:         xcode-select --install && brew install cmake",
      "Then reinstall, or set QUICKJS_NG_SRC to a QuickJS-ng 0.17.0 source directory if the download is blocked.",
      "",
    ].join("\n"),
  );
  process.exit(1);
}
