#!/usr/bin/env bash
# npm run lint: Biome's linter and formatter check over the TypeScript and JavaScript sources
# (biome.json), the length of every source file, then clang-format's check over native/
# (.clang-format) when clang-format is installed. Formatting is checked, never applied: to apply it,
# `npx biome format --write .` and `clang-format -i native/*.cc native/*.h`.
set -euo pipefail
cd "$(dirname "$0")/.."

node_modules/.bin/biome check --error-on-warnings

# No source file over 700 lines (issue 17): a file that long holds more than one concept.
too_long="$(wc -l native/*.cc native/*.h $(find src -name '*.ts') | awk '$2 != "total" && $1 > 700')"
if [[ -n "$too_long" ]]; then
  echo "lint: split these files, each over 700 lines:" >&2
  echo "$too_long" >&2
  exit 1
fi

# The layout is clang-format 14's (Debian 12's); other major versions break lines differently.
if ! command -v clang-format >/dev/null; then
  echo "lint: clang-format is not on PATH; skipped the native/ format check (Debian: apt-get install clang-format)"
elif ! clang-format --version | grep -q "version 14\."; then
  echo "lint: $(clang-format --version | head -n 1) is not clang-format 14; skipped the native/ format check"
else
  clang-format --dry-run -Werror native/*.cc native/*.h
  echo "lint: native/ matches .clang-format ($(clang-format --version | head -n 1))"
fi
