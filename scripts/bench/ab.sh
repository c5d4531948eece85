#!/usr/bin/env bash
# Paired time ratio of two shims on one perf program: K rounds, each runs
# the program under A then under B (LD_PRELOAD), and prints B/A of their
# ops per CPU-second, sorted, then the median.  Pairs in the same round
# see the same load, so the ratio drifts less than either figure.
#
# Usage: [PIN=1] scripts/bench/ab.sh A.so B.so K PROGRAM [ARGS...]
#   PIN=1  run both pinned to CPU 1 (taskset -c 1)
set -euo pipefail
if [ $# -lt 4 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
a=$1 b=$2 rounds=$3
shift 3
pin=()
if [ "${PIN:-0}" = 1 ]; then pin=(taskset -c 1); fi

ops_per_cpu_sec() { # LIB PROGRAM ARGS...
  local lib=$1
  shift
  LD_PRELOAD=$lib "${pin[@]}" "$@" | sed -n 's/.*ops_per_cpu_sec=\([0-9.]*\).*/\1/p'
}

for _ in $(seq "$rounds"); do
  x=$(ops_per_cpu_sec "$a" "$@")
  y=$(ops_per_cpu_sec "$b" "$@")
  echo "$x $y" | awk '{ printf "%.3f %s %s\n", $2 / $1, $1, $2 }'
done | sort -n | awk '{ r[NR] = $1; print } END { print "median", r[int((NR + 1) / 2)] }'
