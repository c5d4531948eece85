#!/usr/bin/env bash
# One heap bug under an allocator must end with SIGABRT and exactly one
# line on stderr that starts with the expected text.
#   expect_abort.sh <heap_bugs> <allocator.so> <bug> <size> <line prefix>
set -uo pipefail
bugs=$1 allocator=$2 bug=$3 size=$4 prefix=$5
err=$(LD_PRELOAD="$allocator" timeout 20 "$bugs" "$bug" "$size" 2>&1 >/dev/null)
status=$?
if [ "$status" -ne 134 ]; then
  echo "FAIL: $bug $size ended with status $status (SIGABRT is 134): $err"
  exit 1
fi
if [ "$(printf '%s\n' "$err" | wc -l)" -ne 1 ] || [[ "$err" != "$prefix"* ]]; then
  echo "FAIL: $bug $size printed '$err', expected one line starting '$prefix'"
  exit 1
fi
echo "ok: $bug $size: $err"
