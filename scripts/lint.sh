#!/usr/bin/env bash
# npm run lint: Biome over the TypeScript and JavaScript sources (biome.json), then clang-format's
# check over native/ (.clang-format) when clang-format is installed. Formatting is checked, never applied.
set -euo pipefail
cd "$(dirname "$0")/.."

node_modules/.bin/biome lint --error-on-warnings

if command -v clang-format >/dev/null; then
  clang-format --dry-run -Werror native/*.cc native/*.h
  echo "lint: native/ matches .clang-format ($(clang-format --version | head -n 1))"
else
  echo "lint: clang-format is not on PATH; skipped the native/ format check (Debian: apt-get install clang-format)"
fi
