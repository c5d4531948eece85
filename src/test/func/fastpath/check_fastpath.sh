#!/usr/bin/env bash
# Check that compiling profiling in costs the malloc/free fast paths nothing.
#  1. The disassembled malloc and free of the two shims are identical
#     (addresses and rip-relative offsets masked).
#  2. callgrind instruction counts of a tight malloc(32)/free loop, per pair,
#     with start-up cancelled by running N and 2N pairs: the profiling shim,
#     not started, equals the plain shim within 0.5 instructions a pair
#     (refills, 1 per ~500 pairs, do check whether profiling was started).
#     The count with profiling started (SNMALLOC_PROFILE=rate=524288) is
#     printed for the record.
set -euo pipefail
plain=$1
profiled=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

body() { # LIB FUNCTION: the function's instructions, addresses masked
  objdump -d --no-show-raw-insn "$1" >"$work/dis.txt"
  awk -v fn="<$2>:" '$2 == fn { on = 1; next } on && /^$/ { exit } on' "$work/dis.txt" |
    sed -E 's/^ *[0-9a-f]+:[[:space:]]*//; s/[0-9a-f]+ <[^>]*>/ADDR/; s/-?0x[0-9a-f]+\(%rip\)/X(%rip)/; s/#.*//'
}

status=0
for fn in malloc free; do
  body "$plain" $fn >"$work/$fn.plain"
  body "$profiled" $fn >"$work/$fn.profiled"
  n=$(grep -c . "$work/$fn.plain" || true)
  if [ "$n" -lt 5 ]; then
    echo "FAIL: could not disassemble $fn from $plain"; status=1; continue
  fi
  if diff -u "$work/$fn.plain" "$work/$fn.profiled"; then
    echo "ok: $fn is identical in both shims ($n instructions, padding included)"
  else
    echo "FAIL: $fn differs between the plain and the profiling shim"; status=1
  fi
done

cat >"$work/pairs.c" <<'C'
#include <stdlib.h>
int main(int argc, char** argv)
{
  long pairs = atol(argv[1]);
  void* volatile sink;
  for (long i = 0; i < pairs; i++) { void* p = malloc(32); sink = p; free(p); }
  (void)sink;
  return 0;
}
C
cc -O2 -fno-builtin -o "$work/pairs" "$work/pairs.c"

total() { # LIB PAIRS [ENV...]
  local lib=$1 pairs=$2; shift 2
  env "$@" LD_PRELOAD="$lib" valgrind --tool=callgrind \
    --callgrind-out-file="$work/cg.out" "$work/pairs" "$pairs" 2>"$work/cg.log" ||
    { cat "$work/cg.log"; return 1; }
  sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$work/cg.log"
}

per_pair() { # LIB [ENV...]
  local lib=$1; shift
  local a b
  a=$(total "$lib" 100000 "$@")
  b=$(total "$lib" 200000 "$@")
  echo "scale=2; ($b - $a) / 100000" | bc
}

p_plain=$(per_pair "$plain" SNMALLOC_UNUSED=1)
p_off=$(per_pair "$profiled" SNMALLOC_UNUSED=1)
p_on=$(per_pair "$profiled" SNMALLOC_PROFILE=rate=524288)
echo "instructions per malloc(32)+free pair, loop included (callgrind):"
echo "  plain shim:                     $p_plain"
echo "  profiling shim, not started:    $p_off"
echo "  profiling shim, started (512K): $p_on"
if [ "$(echo "d = $p_off - $p_plain; if (d < 0) d = -d; d <= 0.5" | bc)" != 1 ]; then
  echo "FAIL: profiling compiled in but not started changes the per-pair cost"
  status=1
fi
if [ "$(echo "$p_on - $p_plain <= 2" | bc)" != 1 ]; then
  echo "FAIL: profiling started costs more than 2 instructions a pair on average"
  status=1
fi
exit $status
