// npm install hook: use a prebuilt addon when one matches this platform, otherwise build from
// source. The package must also work when this script never runs (pnpm, bun, npm's install-script
// approval): src/native.ts finds prebuilds at load time on its own.
import { spawnSync } from "node:child_process";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import { fileURLToPath } from "node:url";

const root = join(dirname(fileURLToPath(import.meta.url)), "..");
const require = createRequire(import.meta.url);
const forced = /^(1|true)$/i.test(process.env.npm_config_build_from_source ?? "") ||
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

console.log(forced ? "quickjs-native: building from source (requested)"
  : unusable ? `quickjs-native: ${unusable}; building from source`
  : `quickjs-native: no prebuilt binary for ${process.platform}-${process.arch}; building from source`);
const ok = run("bash", ["deps/fetch-quickjs.sh"]) &&
  run(process.execPath, [require.resolve("cmake-js/bin/cmake-js"), "compile", "--CDCMAKE_BUILD_TYPE=Release"]);
if (!ok) {
  console.error([
    "",
    "quickjs-native: the source build failed.",
    "It needs: a C11/C++17 compiler (gcc >= 10 or clang >= 12), cmake >= 3.18, make or ninja, bash and patch.",
    "  Debian/Ubuntu: apt-get install build-essential cmake patch",
    "  Fedora/RHEL:   dnf install gcc-c++ make cmake patch",
    "  Alpine:        apk add build-base cmake linux-headers patch bash",
    "  macOS:         xcode-select --install && brew install cmake",
    "Then reinstall, or set QUICKJS_NG_SRC to a QuickJS-ng 0.17.0 source directory if the download is blocked.",
    "",
  ].join("\n"));
  process.exit(1);
}
