# Sourced by fuzz/build.sh and fuzz/run.sh: runs commands as background jobs, as many at once as
# there are cores; await_all fails once all have ended if any failed. CI's machine has two cores, and
# the compiles and fuzz targets one after another left one of them idle.
jobs_max="$(nproc 2>/dev/null || echo 2)"
jobs_running=0
jobs_failed=0

# spawn COMMAND...: starts it in the background, first waiting for a free core.
spawn() {
  if ((jobs_running >= jobs_max)); then
    wait -n || jobs_failed=1
    jobs_running=$((jobs_running - 1))
  fi
  "$@" &
  jobs_running=$((jobs_running + 1))
}

# await_all: waits for every job; fails if any of them failed.
await_all() {
  while ((jobs_running > 0)); do
    wait -n || jobs_failed=1
    jobs_running=$((jobs_running - 1))
  done
  ((jobs_failed == 0))
}
