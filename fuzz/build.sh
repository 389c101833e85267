#!/usr/bin/env bash
# Builds the libFuzzer targets in fuzz/out/ with clang from Debian's packages (clang-14 and
# libclang-rt-14-dev; installed with apt-get when missing and we are root), AddressSanitizer and
# UndefinedBehaviorSanitizer on, QuickJS-ng assertions and leak dumps on (no NDEBUG).
# Objects are rebuilt only when their source is newer.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/fuzz/out"
qjs="$root/deps/quickjs-ng"

find_tool() { for t in "$@"; do command -v "$t" >/dev/null && { command -v "$t"; return; }; done; }
CC="${FUZZ_CC:-$(find_tool clang-14 clang)}"
CXX="${FUZZ_CXX:-$(find_tool clang++-14 clang++)}"
if [[ -z "$CC" || -z "$CXX" ]] || ! echo 'int LLVMFuzzerTestOneInput(const char*d,long n){return 0;}' |
     "$CC" -x c -fsanitize=fuzzer -o /dev/null - 2>/dev/null; then
  if [[ "$(id -u)" == 0 ]] && command -v apt-get >/dev/null; then
    echo "fuzz: installing clang-14 and libclang-rt-14-dev" >&2
    apt-get update -q >/dev/null
    apt-get install -y -q clang-14 libclang-rt-14-dev >/dev/null
    CC="$(find_tool clang-14 clang)"
    CXX="$(find_tool clang++-14 clang++)"
  else
    echo "fuzz: clang with libFuzzer not found (apt-get install clang-14 libclang-rt-14-dev)" >&2
    exit 1
  fi
fi

bash "$root/deps/fetch-quickjs.sh"
mkdir -p "$out/obj"
SAN=(-g -O1 -fno-omit-frame-pointer -fsanitize=address,undefined -fno-sanitize-recover=undefined)

# True when a native header changed after OBJECT was built.
newer_header() { [[ -n "$(find "$root/native" -name '*.h' -newer "$1" -print -quit)" ]]; }

source "$root/fuzz/jobs.sh"

# compile SOURCE OBJECT COMPILER FLAGS...: a background job (fuzz/jobs.sh), skipped when the object
# is newer than the source, the patched engine tree (its .stamp changes whenever the patch set
# does) and every native header.
compile() {
  local src="$1" obj="$2"
  shift 2
  if [[ -f "$obj" && "$obj" -nt "$src" && "$obj" -nt "$qjs/.stamp" ]] && ! newer_header "$obj"; then return; fi
  spawn "$@" -c "$src" -o "$obj"
}

objs=()
for f in quickjs libregexp libunicode dtoa; do
  compile "$qjs/$f.c" "$out/obj/$f.o" "$CC" "${SAN[@]}" -fsanitize=fuzzer-no-link -D_GNU_SOURCE -w -I"$qjs"
  objs+=("$out/obj/$f.o")
done
# True when SOURCE, or its own header, is part of the Node-API layer (includes napi.h or node_api.h).
uses_node_api() { grep -qE '#include <(napi|node_api)\.h>' "$1" "${1%.cc}.h" 2>/dev/null; }

# Every native source but the Node-API layer: the targets drive the codec and the Engine directly.
for src in "$root"/native/*.cc; do
  f="$(basename "$src" .cc)"
  uses_node_api "$src" && continue
  compile "$src" "$out/obj/$f.o" "$CXX" -std=c++17 "${SAN[@]}" -fsanitize=fuzzer-no-link -I"$root/native" -I"$qjs"
  objs+=("$out/obj/$f.o")
done

await_all || { echo "fuzz: a compile failed" >&2; exit 1; }

# One binary per fuzz/*_fuzz.cc.
link_target() {
  "$CXX" -std=c++17 "${SAN[@]}" -fsanitize=fuzzer -I"$root/native" -I"$qjs" "$1" "${objs[@]}" \
    -lm -lpthread -o "$out/$2" && echo "fuzz: built fuzz/out/$2" >&2
}
for target in "$root"/fuzz/*_fuzz.cc; do
  spawn link_target "$target" "$(basename "$target" .cc)"
done
await_all || { echo "fuzz: a link failed" >&2; exit 1; }
