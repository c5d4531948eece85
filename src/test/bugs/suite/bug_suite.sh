#!/usr/bin/env bash
# Runs every bug of heap_bugs at its sizes (8 B, 4 KiB and 256 KiB for
# most) under an allocator and counts those it catches (the program stops
# before its last line).
#   bug_suite.sh <heap_bugs> [allocator.so | glibc] [--at-least N]
# Prints one line per program, then the counts by kind and size, then the
# total; with --at-least, fails when fewer than N are caught.  Environment
# (SNMALLOC_PROFILE=rate=1, say) is passed through.
#
# A program that reaches its end is run up to twice more: some catches
# depend on chance (the checks build missed a one-byte overflow of a 4 KiB
# object in 3 of 400 runs: most likely the byte it writes over the next
# free object's keyed link was the byte already there, 1 in 256), and a
# count that moved with them would fail the threshold now and then.  A
# catch on a later run says so, and the total says how many there were.
set -uo pipefail
bugs=$1
allocator=${2:-glibc}
at_least=${4:-0}
runs_per_program=3
caught=0
caught_again=0
total=0
declare -A kind_caught kind_total
kinds=()
while read -r bug kind sizes; do
  [ -n "${kind_total[$kind]+set}" ] || kinds+=("$kind")
  for size in $sizes; do
    total=$((total + 1))
    caught_at=0 # the run that stopped before the end; 0 if none did
    for run in $(seq "$runs_per_program"); do
      if [ "$allocator" = glibc ]; then
        out=$(timeout 20 "$bugs" "$bug" "$size" 2>&1)
      else
        out=$(LD_PRELOAD="$allocator" timeout 20 "$bugs" "$bug" "$size" 2>&1)
      fi
      status=$?
      if ! printf '%s\n' "$out" | grep -q '^reached the end$'; then
        caught_at=$run
        break
      fi
    done
    class=$([ "$size" -ge 262144 ] && echo large || { [ "$size" -ge 4096 ] && echo medium || echo small; })
    kind_total[$kind]=$((${kind_total[$kind]:-0} + 1))
    kind_total[$kind.$class]=$((${kind_total[$kind.$class]:-0} + 1))
    if [ "$caught_at" -eq 0 ]; then
      verdict=missed
    else
      verdict="caught (status $status): $(printf '%s\n' "$out" | grep -v '^$' | head -1)"
      if [ "$caught_at" -gt 1 ]; then
        verdict="$verdict [at run $caught_at]"
        caught_again=$((caught_again + 1))
      fi
      caught=$((caught + 1))
      kind_caught[$kind]=$((${kind_caught[$kind]:-0} + 1))
      kind_caught[$kind.$class]=$((${kind_caught[$kind.$class]:-0} + 1))
    fi
    printf '%-30s %7s  %s\n' "$bug" "$size" "$verdict"
  done
done < <("$bugs" --list)
echo
printf '%-24s %9s %9s %9s %9s\n' kind small medium large all
for kind in "${kinds[@]}"; do
  row=()
  for class in small medium large; do
    n=${kind_total[$kind.$class]:-0}
    row+=("$([ "$n" -eq 0 ] && echo - || echo "${kind_caught[$kind.$class]:-0}/$n")")
  done
  printf '%-24s %9s %9s %9s %9s\n' "$kind" "${row[@]}" "${kind_caught[$kind]:-0}/${kind_total[$kind]}"
done
echo "caught $caught of $total ($caught_again of them at a second or third run)"
if [ "$caught" -lt "$at_least" ]; then
  echo "FAIL: fewer than $at_least caught"
  exit 1
fi
