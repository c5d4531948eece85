#!/usr/bin/env bash
# Runs every bug of heap_bugs at 8 B, 4 KiB and 256 KiB under an allocator
# and counts those it catches (the program stops before its last line).
#   bug_suite.sh <heap_bugs> [allocator.so | glibc] [--at-least N]
# Prints one line per program and the total; with --at-least, fails when
# fewer than N are caught.  Environment (SNMALLOC_PROFILE=rate=1, say) is
# passed through.
set -uo pipefail
bugs=$1
allocator=${2:-glibc}
at_least=${4:-0}
caught=0
total=0
for bug in $("$bugs" --list); do
  for size in 8 4096 262144; do
    total=$((total + 1))
    if [ "$allocator" = glibc ]; then
      out=$(timeout 20 "$bugs" "$bug" "$size" 2>&1)
    else
      out=$(LD_PRELOAD="$allocator" timeout 20 "$bugs" "$bug" "$size" 2>&1)
    fi
    status=$?
    if printf '%s\n' "$out" | grep -q '^reached the end$'; then
      verdict=missed
    else
      verdict="caught (status $status): $(printf '%s\n' "$out" | grep -v '^$' | head -1)"
      caught=$((caught + 1))
    fi
    printf '%-30s %7s  %s\n' "$bug" "$size" "$verdict"
  done
done
echo "caught $caught of $total"
if [ "$caught" -lt "$at_least" ]; then
  echo "FAIL: fewer than $at_least caught"
  exit 1
fi
