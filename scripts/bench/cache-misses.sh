#!/usr/bin/env bash
# Instructions and data-cache misses of one program under each of the given
# shims, from cachegrind's cache model: exact and repeatable, where time on a
# shared machine is neither.  The model has a 32 KiB 8-way first level and,
# unless LL is set, a 2 MiB 16-way last level (a core's share of a server's
# cache); it does not see prefetches, so a load the code prefetched counts
# as a miss.  Children are followed (env execs the program).
#
# Prints one line per shim: instructions, D1 misses (read + write), LLd
# misses (read + write).  "" as a shim runs the program with no preload.
#
# Usage: scripts/bench/cache-misses.sh "A.so [B.so ...]" PROGRAM [ARGS...]
#   LL=size,assoc,line   the last level's geometry (default 2097152,16,64)
set -euo pipefail
if [ $# -lt 2 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
shims=$1
shift
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Sum one event column over every output file cachegrind wrote.
total() { # EVENT
  awk -v ev="$1" '
    /^events:/ { for (i = 2; i <= NF; i++) col[$i] = i - 1 }
    /^summary:/ { sum += $(col[ev] + 1) }
    END { printf "%.0f", sum }' "$out"/cg.*
}

for shim in ${shims:-""}; do
  rm -f "$out"/cg.*
  valgrind --tool=cachegrind --trace-children=yes --cache-sim=yes \
    --D1=32768,8,64 --LL="${LL:-2097152,16,64}" \
    --cachegrind-out-file="$out/cg.%p" env LD_PRELOAD="$shim" "$@" >/dev/null 2>&1
  ir=$(total Ir)
  d1=$(($(total D1mr) + $(total D1mw)))
  ll=$(($(total DLmr) + $(total DLmw)))
  printf '%s: %s instructions, D1 misses %s, LLd misses %s\n' \
    "${shim:-no preload}" "$ir" "$d1" "$ll"
done
