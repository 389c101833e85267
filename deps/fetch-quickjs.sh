#!/usr/bin/env bash
# Puts the pinned QuickJS-ng sources, with deps/patches applied, into deps/quickjs-ng/.
#
# Source of the pristine files, first match wins:
#   1. $QUICKJS_NG_SRC: a directory holding quickjs.c (a submodule checkout, a distro tree...)
#   2. deps/quickjs-ng-src/: the pristine copy shipped inside the npm tarball
#   3. Debian's binary package qjs-src, downloaded with apt through a private sources list
#      that reuses the mirror URI of this system's own apt configuration (the system's
#      configuration is never modified). The .deb is checked against the lock file's sha256.
# Re-running is cheap: a stamp records the lock and patch set the tree was made from.
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
lock="$here/quickjs-ng.lock.json"
dest="$here/quickjs-ng"
cache="$here/.cache"

die() { echo "fetch-quickjs: $*" >&2; exit 1; }
lock_field() { node -e 'const l=require(process.argv[1]);const v=process.argv[2].split(".").reduce((o,k)=>o[k],l);console.log(Array.isArray(v)?v.join(" "):v)' "$lock" "$1"; }

version="$(lock_field version)"
sha256="$(lock_field sha256)"
pkg="$(lock_field source.package)"
pkg_version="$(lock_field source.packageVersion)"
suites="$(lock_field source.suites)"
component="$(lock_field source.component)"
deb_file="$(lock_field source.file)"
path_in_pkg="$(lock_field source.pathInPackage)"
engine_sources="$(lock_field engineSources)"

shopt -s nullglob
patches=("$here"/patches/*.patch)
stamp_wanted="$(cat "$lock" "${patches[@]}" | sha256sum | cut -d' ' -f1)"
if [[ -f "$dest/.stamp" && "$(cat "$dest/.stamp")" == "$stamp_wanted" ]]; then
  exit 0
fi

# Prints the first Debian archive URI configured for apt on this machine (not the security archive).
system_debian_mirror() {
  local f
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    awk 'BEGIN{IGNORECASE=1} /^URIs:/{for(i=2;i<=NF;i++) print $i}' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f "$f" ]] || continue
    awk '$1=="deb"{for(i=2;i<=NF;i++) if($i !~ /^\[/ && $i !~ /\]$/){print $i; break}}' "$f"
  done
} 2>/dev/null

pick_mirror() {
  system_debian_mirror | grep -E '/debian/?$' | grep -v -- '-security' | head -n 1
}

download_deb() {
  local mirror aptdir suite opts
  command -v apt-get >/dev/null || die "apt-get not found: set QUICKJS_NG_SRC to a QuickJS-ng $version source directory"
  mirror="$(pick_mirror)"
  [[ -n "$mirror" ]] || die "no Debian mirror found in this system's apt configuration: set QUICKJS_NG_SRC to a QuickJS-ng $version source directory"
  aptdir="$cache/apt"
  for suite in $suites; do
    rm -rf "$aptdir"
    mkdir -p "$aptdir/lists/partial" "$aptdir/archives/partial" "$aptdir/etc/preferences.d"
    echo "deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] $mirror $suite $component" > "$aptdir/etc/sources.list"
    opts=(-o "Dir::Etc::SourceList=$aptdir/etc/sources.list" -o "Dir::Etc::SourceParts=/dev/null"
          -o "Dir::Etc::Preferences=/dev/null" -o "Dir::Etc::PreferencesParts=$aptdir/etc/preferences.d"
          -o "Dir::State::Lists=$aptdir/lists" -o "Dir::Cache=$aptdir" -o "Dir::Cache::archives=$aptdir/archives"
          -o "APT::Sandbox::User=root" -o "Acquire::Languages=none" -o "Debug::NoLocking=1")
    echo "fetch-quickjs: looking for $pkg $pkg_version in suite $suite" >&2
    if apt-get -q "${opts[@]}" update >"$aptdir/update.log" 2>&1 &&
       (cd "$cache" && apt-get -q "${opts[@]}" download "$pkg=$pkg_version" >"$aptdir/download.log" 2>&1); then
      return 0
    fi
  done
  die "could not download $pkg=$pkg_version from suites: $suites (see $aptdir/*.log)"
}

unpack_deb() {
  local out="$1"
  mkdir -p "$out"
  if command -v dpkg-deb >/dev/null; then
    dpkg-deb -x "$cache/$deb_file" "$out"
  else
    (cd "$out" && ar x "$cache/$deb_file" && tar -xf data.tar.*)
  fi
}

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
if [[ -n "${QUICKJS_NG_SRC:-}" ]]; then
  [[ -f "$QUICKJS_NG_SRC/quickjs.c" ]] || die "QUICKJS_NG_SRC=$QUICKJS_NG_SRC does not contain quickjs.c"
  cp -R "$QUICKJS_NG_SRC/." "$work/src"
elif [[ -f "$here/quickjs-ng-src/quickjs.c" ]]; then
  cp -R "$here/quickjs-ng-src/." "$work/src"
else
  mkdir -p "$cache"
  if [[ ! -f "$cache/$deb_file" ]] || ! echo "$sha256  $cache/$deb_file" | sha256sum -c --status; then
    rm -f "$cache/$deb_file"
    download_deb
  fi
  actual="$(sha256sum "$cache/$deb_file" | cut -d' ' -f1)"
  if [[ "$actual" != "$sha256" ]]; then
    rm -f "$cache/$deb_file"
    die "checksum mismatch for $deb_file: expected $sha256, got $actual. The download is not the pinned QuickJS-ng $version; refusing to build."
  fi
  unpack_deb "$work/deb"
  mv "$work/deb/$path_in_pkg" "$work/src"
fi

grep -q "QJS_VERSION_MINOR" "$work/src/quickjs.h" || die "quickjs.h missing from the source tree"
for f in $engine_sources; do [[ -f "$work/src/$f" ]] || die "engine source $f missing from the source tree"; done

# Keep a pristine copy for the npm tarball, then apply our patches in lexical order.
rm -rf "$here/quickjs-ng-src"
cp -R "$work/src" "$here/quickjs-ng-src"
for p in "${patches[@]}"; do
  patch -s -p1 -d "$work/src" --no-backup-if-mismatch < "$p" || die "patch $(basename "$p") does not apply to QuickJS-ng $version"
done
echo "$stamp_wanted" > "$work/src/.stamp"
rm -rf "$dest"
mv "$work/src" "$dest"
echo "fetch-quickjs: QuickJS-ng $version ready in deps/quickjs-ng" >&2
