#!/usr/bin/env bash
# Tarball smoke test: what a user gets from npm. Packs the package, then installs the tarball
# into empty projects twice:
#   (a) with every C/C++ compiler, make, ninja and cmake hidden from PATH: the prebuilt binary
#       must be the one that loads;
#       It is a Sandbox-only install: the optional LangChain peers must not come along.
#   (b) with npm_config_build_from_source=true, offline, apt hidden and proxies pointing nowhere:
#       the addon must build from the tarball's own QuickJS-ng sources, with no download. The
#       LangChain peers are installed too, and the agent entry point must load.
# In both, the package is imported, code is evaluated and the CLI prints a value.
# Usage: bash scripts/smoke-tarball.sh   (from anywhere; needs a built tree: npm ci did that)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
work="$(mktemp -d "${TMPDIR:-/tmp}/qjsn-smoke.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() { echo "smoke: FAIL: $*" >&2; exit 1; }
now() { date +%s.%N; }
since() { awk -v a="$1" -v b="$(now)" 'BEGIN{printf "%.1f s", b-a}'; }

echo "smoke: npm pack (prepack refreshes this machine's prebuild; release binaries already in prebuilds/ are kept)"
t0="$(now)"
tarball="$(cd "$root" && QJSN_HOST_ONLY_TARBALL=1 npm pack --silent --pack-destination "$work" | tail -n 1)"
tarball="$work/$tarball"
[[ -f "$tarball" ]] || fail "npm pack did not produce a tarball"
listing="$(tar -tzf "$tarball")"
for want in package/dist/index.js package/dist/cli/index.js package/scripts/install.js package/CMakeLists.txt \
            package/deps/quickjs-ng-src/quickjs.c package/deps/fetch-quickjs.sh package/deps/quickjs-ng.lock.json; do
  grep -qx "$want" <<<"$listing" || fail "$want missing from the tarball"
done
grep -qE '^package/prebuilds/[a-z0-9]+-[a-z0-9]+/quickjs-native\.napi(\.(glibc|musl))?\.node$' <<<"$listing" ||
  fail "no prebuilt binary in the tarball"
if grep -qE '^package/(build|deps/quickjs-ng|deps/\.cache|test|bench)/' <<<"$listing"; then
  fail "build output, patched sources, tests or benchmarks leaked into the tarball"
fi
echo "smoke: $(basename "$tarball") $(du -k "$tarball" | cut -f1) KiB packed, $(wc -l <<<"$listing") files ($(since "$t0"))"

# Fills directory $2 with symlinks to every executable on PATH whose name does not match regex $1.
path_without() {
  local skip="$1" dest="$2" dir exe name
  mkdir -p "$dest"
  for dir in "${path_dirs[@]}"; do
    [[ -d "$dir" ]] || continue
    for exe in "$dir"/*; do
      name="${exe##*/}"
      [[ -x "$exe" && ! -d "$exe" && ! -e "$dest/$name" ]] || continue
      [[ "$name" =~ $skip ]] && continue
      ln -s "$exe" "$dest/$name"
    done
  done
}
IFS=: read -r -a path_dirs <<<"$PATH"
nocc="$work/bin-nocc"
path_without '^(([a-z0-9_]+-)*(cc|c\+\+|cpp|gcc|g\+\+|clang|clang\+\+|c89|c99)(-[0-9.]+)?|cmake|ctest|cpack|make|gmake|ninja|ld|ld\.[a-z]+|as)$' "$nocc"
for tool in cc c++ gcc g++ cmake make ninja; do
  if PATH="$nocc" command -v "$tool" >/dev/null; then fail "$tool is still reachable on the compiler-free PATH"; fi
done

# Imports the installed package, evaluates guest code, runs the CLI; prints which binary loaded.
# With "langchain" as $2, also loads the agent entry point (its peers must be installed).
# (Callers use `|| fail`, which turns off errexit in here: every step checks its own status.)
check_project() {
  local dir="$1" loaded printed
  loaded="$(cd "$dir" && WITH_LANGCHAIN="${2:-}" LD_BIND_NOW=1 node --input-type=module -e '
    import { Sandbox, SandboxError } from "quickjs-native";
    import { createRequire } from "node:module";
    const sb = new Sandbox({ memoryLimitBytes: 8 * 1024 * 1024, executionTimeoutMs: 200 });
    const value = await sb.eval("const xs = [1, 2, 3]; await Promise.resolve(xs.map((x) => x * 2))");
    if (JSON.stringify(value) !== "[2,4,6]") throw new Error("unexpected value " + JSON.stringify(value));
    sb.defineFunction("host.add", (a, b) => a + b);
    if (sb.evalSync("host.add(40, 2)") !== 42) throw new Error("host call failed");
    try { sb.evalSync("for (;;) {}"); throw new Error("timeout did not fire"); }
    catch (e) { if (!(e instanceof SandboxError) || e.code !== "TIMEOUT") throw e; }
    sb.dispose();
    if (process.env.WITH_LANGCHAIN) {
      // The agent entry point resolves with its runtime dependencies (acorn, typescript, zod, the peers).
      const { createCodeInterpreterMiddleware } = await import("quickjs-native/langchain");
      createCodeInterpreterMiddleware().dispose();
    }
    const require = createRequire(import.meta.url);
    const pkg = require.resolve("quickjs-native/package.json").replace(/package\.json$/, "");
    console.log(require("node-gyp-build").path(pkg).slice(pkg.length));
  ')" || { echo "smoke: importing and evaluating failed in $dir" >&2; return 1; }
  printed="$(cd "$dir" && npx --no-install quickjs-native eval "[1,2,3].map(x=>x*2)")" ||
    { echo "smoke: the CLI failed in $dir" >&2; return 1; }
  [[ "$printed" == "[ 2, 4, 6 ]" ]] || { echo "smoke: the CLI printed '$printed'" >&2; return 1; }
  echo "$loaded"
}

new_project() {
  mkdir -p "$1"
  (cd "$1" && npm init -y >/dev/null)
}

echo "smoke: (a) install with no compiler or cmake on PATH"
new_project "$work/a"
t0="$(now)"
(cd "$work/a" && PATH="$nocc" npm install --no-audit --no-fund --foreground-scripts "$tarball" >"$work/a.log" 2>&1) ||
  { cat "$work/a.log"; fail "(a) npm install failed without a compiler"; }
t_a="$(since "$t0")"
loaded="$(PATH="$nocc" check_project "$work/a")" || fail "(a) the installed package does not work"
[[ "$loaded" == prebuilds/* ]] || fail "(a) loaded $loaded instead of a prebuilt binary"
[[ ! -e "$work/a/node_modules/quickjs-native/build" ]] || fail "(a) a source build ran"
for peer in langchain @langchain/core; do
  [[ ! -e "$work/a/node_modules/$peer" ]] || fail "(a) the optional peer $peer was installed for a Sandbox-only project"
done
echo "smoke: (a) ok in $t_a: loaded $loaded; node_modules $(du -sm "$work/a/node_modules" | cut -f1) MB (no LangChain)"

echo "smoke: (b) install with npm_config_build_from_source=true, offline, apt hidden"
new_project "$work/b"
noapt="$work/bin-noapt"
path_without '^(apt|apt-get|curl|wget)$' "$noapt"
t0="$(now)"
# The peers at the versions this clone's npm ci put in npm's cache, so --offline finds them.
peers=()
for peer in langchain @langchain/core; do
  peers+=("$peer@$(node -p 'require(process.argv[1]).version' "$root/node_modules/$peer/package.json")")
done
# --offline resolves every package's version from the packuments in npm's cache, and npm ci of a
# lock file fetches tarballs only: on a machine whose cache has never seen a packument of the peers'
# tree (@cfworker/json-schema under @langchain/core), the offline install fails before any build.
# A lock-only install of the same packages, online, caches those packuments; it builds nothing.
new_project "$work/b-resolve"
(cd "$work/b-resolve" && npm install --package-lock-only --ignore-scripts --no-audit --no-fund "$tarball" "${peers[@]}" >"$work/b-resolve.log" 2>&1) ||
  { cat "$work/b-resolve.log"; fail "(b) resolving the peers' dependency tree failed"; }
(cd "$work/b" && PATH="$noapt" npm_config_build_from_source=true \
  npm install --offline --no-audit --no-fund --foreground-scripts "$tarball" "${peers[@]}" >"$work/b.log" 2>&1) ||
  { cat "$work/b.log"; fail "(b) the source build from the tarball failed"; }
t_b="$(since "$t0")"
grep -q "building from source (requested)" "$work/b.log" || { cat "$work/b.log"; fail "(b) install.js did not build from source"; }
loaded="$(check_project "$work/b" langchain)" || fail "(b) the installed package does not work"
[[ "$loaded" == build/Release/* ]] || fail "(b) loaded $loaded instead of the fresh source build"
echo "smoke: (b) ok in $t_b: built and loaded $loaded"
echo "smoke: tarball ok"
