#!/usr/bin/env bash
# Puts the pinned QuickJS-ng sources, with deps/patches applied, into deps/quickjs-ng/.
#
# Source of the pristine files, first match wins:
#   1. $QUICKJS_NG_SRC: a directory holding quickjs.c (a checkout of the tag, a distro tree...)
#   2. deps/quickjs-ng-src/: the pristine copy shipped inside the npm tarball
#   3. Debian's binary package qjs-src, downloaded with apt through a private sources list
#      that reuses the mirror URI of this system's own apt configuration (the system's
#      configuration is never modified). The .deb is checked against the lock file's sha256.
#   4. Without apt (macOS, Fedora, Alpine...): a shallow git clone of the upstream tag named in
#      the lock file ($QUICKJS_NG_GIT_URL overrides the repository, e.g. a local mirror). Every
#      file must match the lock file's per-file sha256 (taken from Debian's tree), or nothing is built.
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
upstream_repo="$(lock_field upstream.repository)"
upstream_tag="$(lock_field upstream.tag)"

shopt -s nullglob
patches=("$here"/patches/*.patch)
stamp_wanted="$(cat "$lock" "${patches[@]}" | sha256sum | cut -d' ' -f1)"
if [[ -f "$dest/.stamp" && "$(cat "$dest/.stamp")" == "$stamp_wanted" ]]; then
  exit 0
fi

# Downloads the pinned qjs-src .deb into the cache; says why and returns 1 when it cannot.
download_deb() {
  local mirror aptdir suite opts
  command -v apt-get >/dev/null || { echo "fetch-quickjs: apt-get not found" >&2; return 1; }
  mirror="$(bash "$here/debian-mirror.sh" || true)"
  [[ -n "$mirror" ]] || { echo "fetch-quickjs: no Debian mirror in this system's apt configuration" >&2; return 1; }
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
  echo "fetch-quickjs: could not download $pkg=$pkg_version from suites: $suites (see $aptdir/*.log)" >&2
  return 1
}

# Prints "sha256  file" for every file of the pinned tree, the format sha256sum -c reads.
file_sums() {
  node -e 'const l=require(process.argv[1]);for(const [f,h] of Object.entries(l.fileSha256))console.log(`${h}  ${f}`)' "$lock"
}

# Clones the upstream tag into $1 and keeps only the pinned files, each checked against its sha256.
clone_upstream() {
  local out="$1" url="${QUICKJS_NG_GIT_URL:-$upstream_repo}" f
  command -v git >/dev/null || die "neither apt nor git is available: install git, or set QUICKJS_NG_SRC to a QuickJS-ng $version source directory"
  echo "fetch-quickjs: cloning $upstream_tag of $url" >&2
  git -c advice.detachedHead=false clone -q --depth 1 --branch "$upstream_tag" "$url" "$work/git" ||
    die "git clone of $upstream_tag from $url failed: set QUICKJS_NG_SRC to a QuickJS-ng $version source directory"
  if ! (cd "$work/git" && file_sums | sha256sum -c --quiet >"$work/sums.log" 2>&1); then
    die "the clone of $upstream_tag differs from the pinned QuickJS-ng $version files; refusing to build:
$(grep -v '^sha256sum:' "$work/sums.log")"
  fi
  mkdir -p "$out"
  for f in $(file_sums | cut -d' ' -f3-); do cp "$work/git/$f" "$out/$f"; done
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
    download_deb || true
  fi
  if [[ -f "$cache/$deb_file" ]]; then
    actual="$(sha256sum "$cache/$deb_file" | cut -d' ' -f1)"
    if [[ "$actual" != "$sha256" ]]; then
      rm -f "$cache/$deb_file"
      die "checksum mismatch for $deb_file: expected $sha256, got $actual. The download is not the pinned QuickJS-ng $version; refusing to build."
    fi
    unpack_deb "$work/deb"
    mv "$work/deb/$path_in_pkg" "$work/src"
  else
    clone_upstream "$work/src"
  fi
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
