#!/usr/bin/env bash
# Runs freed_write_program under the checks shim over sizes, kinds of
# write, freeing threads and seeds.  A write must end the program with
# SIGABRT (status 134) and one line naming the written object's address;
# no write must end it with status 0 and nothing on stderr, with the
# profiler sampling too (rate=1 samples every object, 4096 some).
#   exit_sweep.sh <freed_write_program> <checks shim>
set -uo pipefail
program=$1 shim=$2
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

for size in 16 24 48 136 1000 4096 9000 40000; do
  for who in main exited cross; do
    for seed in 1 2 3; do
      for where in none word0 word1 zero0; do
        run "SNMALLOC_PROFILE=" "$size" "$where" "$who" "$seed"
      done
    done
  done
done
for rate in 1 4096; do
  for size in 16 1000 40000; do
    for who in main exited cross; do
      run "SNMALLOC_PROFILE=rate=$rate" "$size" none "$who" 3
    done
  done
done
echo "$runs runs, $failures failed"
[ "$failures" -eq 0 ]
