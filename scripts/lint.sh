#!/usr/bin/env bash
# npm run lint: Biome over the TypeScript and JavaScript sources (biome.json), then clang-format's
# check over native/ (.clang-format) when clang-format is installed. Formatting is checked, never applied.
set -euo pipefail
cd "$(dirname "$0")/.."

node_modules/.bin/biome lint --error-on-warnings

# The layout is clang-format 14's (Debian 12's); other major versions break lines differently.
if ! command -v clang-format >/dev/null; then
  echo "lint: clang-format is not on PATH; skipped the native/ format check (Debian: apt-get install clang-format)"
elif ! clang-format --version | grep -q "version 14\."; then
  echo "lint: $(clang-format --version | head -n 1) is not clang-format 14; skipped the native/ format check"
else
  clang-format --dry-run -Werror native/*.cc native/*.h
  echo "lint: native/ matches .clang-format ($(clang-format --version | head -n 1))"
fi
