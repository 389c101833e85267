#!/usr/bin/env bash
# Prints the first Debian archive URI configured for apt on this machine (not the security
# archive), so scripts reuse the system's mirror without ever naming a host in this repository.
# Used by deps/fetch-quickjs.sh (the engine's .deb) and scripts/test-platforms.sh (debootstrap).
set -euo pipefail
{
  for f in /etc/apt/sources.list.d/*.sources; do
    [[ -f "$f" ]] || continue
    awk 'BEGIN{IGNORECASE=1} /^URIs:/{for(i=2;i<=NF;i++) print $i}' "$f"
  done
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [[ -f "$f" ]] || continue
    awk '$1=="deb"{for(i=2;i<=NF;i++) if($i !~ /^\[/ && $i !~ /\]$/){print $i; break}}' "$f"
  done
} 2>/dev/null | grep -E '/debian/?$' | grep -v -- '-security' | head -n 1
