#!/usr/bin/env bash
# What `npm install quickjs-native` costs a project without LangChain: packs the package (this
# machine's binary; QJSN_HOST_ONLY_TARBALL unless the release set is in prebuilds/), installs the
# tarball into an empty project as a user would (optional peers are not installed), and reports
# the number of packages and the size of node_modules (du, KiB).
#
#   bash scripts/install-size.sh            # prints: packages=N size_kib=K
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
tarball="$work/$(cd "$root" && QJSN_HOST_ONLY_TARBALL="${QJSN_HOST_ONLY_TARBALL:-1}" npm pack --silent --pack-destination "$work" | tail -n 1)"
mkdir "$work/project"
cd "$work/project"
echo '{ "name": "install-size", "version": "1.0.0", "private": true }' >package.json
npm install --no-audit --no-fund "$tarball" </dev/null >/dev/null
# Every installed package, nested ones included (the project itself is the first line).
packages="$(($(npm ls --all --parseable </dev/null | wc -l) - 1))"
size="$(du -sk node_modules | cut -f1)"
echo "packages=$packages size_kib=$size"
