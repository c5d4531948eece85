#!/usr/bin/env bash
# Runs freed_write_program under a checks shim over sizes, kinds of
# write, places of the freed object and seeds.  A write must end the
# program with SIGABRT (status 134) and one line naming the written
# object's address; no write must end it with status 0 and nothing on
# stderr.  With a second shim, a checks build's profiling shim, the
# programs without a write run again with the profiler sampling (rate=1
# samples every object, 4096 some), whose held-back objects the sweep
# reads too.  (A sampled object has no free mark: writes into one are
# the profiler's to find.)
#   exit_sweep.sh <freed_write_program> <checks shim> [<checks profiling shim>]
set -uo pipefail
program=$1 shim=$2 profiling_shim=${3:-}
failures=0 runs=0

run() { # ENV SIZE WHERE WHO SEED
  local env=$1 size=$2 where=$3 who=$4 seed=$5 out err status
  err=$(mktemp)
  out=$(env $env LD_PRELOAD="$shim" timeout 20 "$program" "$size" "$where" "$who" "$seed" 2>"$err")
  status=$?
  runs=$((runs + 1))
  local text
  text=$(cat "$err")
  rm -f "$err"
  if [ "$where" = none ]; then
    # Sampling moves the refill's split: `fast` may not reach its shape.
    if [ "$who" = fast ] && [ "$status" -eq 3 ] && [[ "$env" == *rate=* ]]; then
      return
    fi
    if [ "$status" -ne 0 ] || [ -n "$text" ]; then
      echo "FAIL: $env $size $where $who $seed: status $status, stderr '$text' (expected 0 and nothing)"
      failures=$((failures + 1))
    fi
    return
  fi
  if [ "$status" -ne 134 ] || [ "$(printf '%s\n' "$text" | wc -l)" -ne 1 ] ||
    [[ "$text" != "snmalloc: fatal: "*" $out" ]]; then
    echo "FAIL: $env $size $where $who $seed: status $status, stderr '$text' (expected SIGABRT and one line ending in $out)"
    failures=$((failures + 1))
  fi
}

whos="main exited cross inbox idle-inbox fast"
for size in 16 24 48 136 1000 4096 9000 40000; do
  for who in $whos; do
    for seed in 1 2 3; do
      for where in none word0 word1 zero0; do
        # A freed object in main's cache of frees for another thread may be
        # the last of its batch, whose link the post writes over the
        # program's write: only the mark tells.
        if [ "$who" = idle-inbox ] && [ "$where" != none ] && [ "$where" != word1 ]; then
          continue
        fi
        run "SNMALLOC_PROFILE=" "$size" "$where" "$who" "$seed"
      done
    done
  done
done
if [ -n "$profiling_shim" ]; then
  shim=$profiling_shim
  for rate in 1 4096; do
    for size in 16 1000 40000; do
      for who in $whos; do
        run "SNMALLOC_PROFILE=rate=$rate" "$size" none "$who" 4
      done
    done
  done
fi
echo "$runs runs, $failures failed"
[ "$failures" -eq 0 ]
