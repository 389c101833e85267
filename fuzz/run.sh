#!/usr/bin/env bash
# Builds the fuzz targets, replays every committed crash regression, then fuzzes each target for
# FUZZ_SECONDS (default 60) starting from its seed corpus, the targets side by side, one per core.
# New corpus entries stay in fuzz/out/corpus/ (not committed); a crash leaves its input in
# fuzz/out/crashes/ and fails the run.
# To keep a crash as a regression: fix it, then copy the input to fuzz/regressions/<target>/.
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
out="$root/fuzz/out"
seconds="${FUZZ_SECONDS:-60}"

bash "$root/fuzz/build.sh"
source "$root/fuzz/jobs.sh"

# fuzz_target BINARY: replays the target's regressions, then fuzzes it from its seeds; its report
# goes to fuzz/out/<target>.report, printed once every target has ended (they run side by side).
fuzz_target() {
  local bin="$1" target status=0
  target="$(basename "$bin" _fuzz)"
  local seeds="$root/fuzz/corpus/$target" regressions="$root/fuzz/regressions/$target" work="$out/corpus/$target"
  local opts=(-rss_limit_mb=2048 -max_len=65536 -timeout=10 -print_final_stats=1 -artifact_prefix="$out/crashes/$target-")
  exec >"$out/$target.report" 2>&1
  mkdir -p "$work" "$out/crashes"
  if compgen -G "$regressions/*" >/dev/null; then
    echo "== fuzz $target: replaying $(ls "$regressions" | wc -l) regression inputs"
    "$bin" "${opts[@]}" "$regressions"/* || status=1
  fi
  echo "== fuzz $target: ${seconds}s from $(ls "$seeds" | wc -l) seeds"
  if ! "$bin" "${opts[@]}" -max_total_time="$seconds" "$work" "$seeds" > "$out/$target.log" 2>&1; then
    status=1
    tail -n 60 "$out/$target.log"
    for crash in "$out/crashes/$target-"*; do
      [[ -f "$crash" ]] && echo "crash input $(basename "$crash") (base64): $(base64 -w0 "$crash")"
    done
  else
    grep -E "^(Done|stat::number_of_executed_units|stat::peak_rss_mb)" "$out/$target.log" || true
  fi
  return $status
}

for bin in "$out"/*_fuzz; do spawn fuzz_target "$bin"; done
status=0
await_all || status=1
for bin in "$out"/*_fuzz; do cat "$out/$(basename "$bin" _fuzz).report"; done
exit $status
