#!/usr/bin/env bash
# Callgrind instruction totals of the perf workloads, plain shim vs profiling
# shim, for before/after comparisons of changes that should not change the
# generated code (e.g. a source-tree restructuring).
#
# Each workload program (perf-<name> in PERF_DIR) runs at a fixed size under
#   valgrind --tool=callgrind --trace-children=no
# once with LD_PRELOAD=$BUILD/libsnmallocshim.so (plain) and once with
# LD_PRELOAD=$BUILD/libsnmallocshim-profile.so SNMALLOC_PROFILE=rate=524288
# (sampling once per 512 KiB).  The total of a run is the sum of the
# "totals:" (else "summary:") lines of all its callgrind output files.
# Callgrind serialises threads; the totals still count every thread's
# instructions.  fork-exec (execs children) and peak-growth, start-cpu and
# startup-rss (not workload loops) are not run.
#
# Prints a Markdown table: workload, args, plain Ir, profiled Ir, ratio.
# Then reruns the CHECK workloads (plain and profiled) and reports whether
# their totals are identical to the first run's.
#
# Usage: scripts/bench/callgrind-totals.sh BUILD_DIR [PERF_DIR]
#   BUILD_DIR  build tree holding libsnmallocshim{,-profile}.so
#   PERF_DIR   folder of the perf-* programs (default BUILD_DIR/src/test/perf)
# Environment:
#   WORKLOADS  space-separated subset to run (default: all eight below)
#   CHECK      workloads to run a second time for the determinism check
#              (default "churn"; "" to skip)
#   KEEP=1     keep the callgrind output folder (its path is printed)
#   PROFILE_PRELOAD  a library preloaded before the profiling shim in the
#              profiled runs (e.g. $BUILD/src/test/perf/profile/
#              libperf-label-every-thread.so: every thread labelled)
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//' >&2
  exit 2
fi
build=$(cd "$1" && pwd)
perf_dir=$(cd "${2:-$build/src/test/perf}" && pwd)
plain_lib=$build/libsnmallocshim.so
profile_lib=$build/libsnmallocshim-profile.so
for f in "$plain_lib" "$profile_lib"; do
  [ -e "$f" ] || { echo "missing $f" >&2; exit 1; }
done

# Fixed sizes: each run takes roughly 5-20 s under callgrind on a 2-core
# machine.  --threads is accepted (and ignored) by single-threaded programs.
declare -A ARGS=(
  [churn]="--ops 5000000 --threads 2"
  [random-replace]="--ops 4000000 --threads 2"
  [producer-consumer]="--ops 2000000 --threads 2"
  [larson]="--ops 4000000 --threads 2"
  [large-churn]="--ops 20000 --threads 2"
  [realloc-growth]="--ops 40000 --threads 2"
  [xthread-mix]="--ops 1000000 --threads 2"
  [thread-churn]="--ops 2000000 --threads 2"
)
ORDER="churn random-replace producer-consumer larson large-churn realloc-growth xthread-mix thread-churn"
workloads=${WORKLOADS:-$ORDER}
check=${CHECK-churn}

work=$(mktemp -d /tmp/callgrind-totals.XXXXXX)
if [ "${KEEP:-}" = 1 ]; then
  echo "callgrind outputs kept in $work" >&2
else
  trap 'rm -rf "$work"' EXIT
fi

# run NAME VARIANT TAG: runs one workload under callgrind, prints its total.
# The run's working directory is its own folder, so anything the program or
# the profiler writes stays there.
run() {
  local name=$1 variant=$2 tag=$3 dir
  dir=$work/$name.$variant.$tag
  mkdir -p "$dir"
  local -a env_args=(LD_PRELOAD="$plain_lib")
  if [ "$variant" = profile ]; then
    env_args=(LD_PRELOAD="${PROFILE_PRELOAD:+$PROFILE_PRELOAD:}$profile_lib" SNMALLOC_PROFILE=rate=524288)
  fi
  # shellcheck disable=SC2086 # ARGS values are word lists
  if ! (cd "$dir" && env "${env_args[@]}" valgrind --tool=callgrind \
    --trace-children=no --callgrind-out-file="$dir/callgrind.out.%p" \
    "$perf_dir/perf-$name" ${ARGS[$name]} >"$dir/stdout" 2>"$dir/stderr"); then
    echo "FAILED: $name ($variant); see $dir/stderr" >&2
    cat "$dir/stderr" >&2
    return 1
  fi
  # One file per process (threads are merged unless --separate-threads=yes);
  # sum them all to be safe.  totals: is the last line; summary: the same.
  local total
  total=$(awk '/^totals:/ { t += $2; seen = 1 } /^summary:/ { s += $2 }
    END { printf "%d\n", seen ? t : s }' "$dir"/callgrind.out.*)
  [ "$total" -gt 0 ] || { echo "no total for $name ($variant)" >&2; return 1; }
  echo "$total"
}

start=$(date +%s)
declare -A PLAIN PROFILE
echo "| workload | args | plain Ir | profiled Ir (rate=524288) | profiled/plain |"
echo "| --- | --- | ---: | ---: | ---: |"
for name in $workloads; do
  [ -n "${ARGS[$name]:-}" ] || { echo "unknown workload $name" >&2; exit 1; }
  PLAIN[$name]=$(run "$name" plain 1)
  PROFILE[$name]=$(run "$name" profile 1)
  awk -v n="$name" -v a="${ARGS[$name]}" -v p="${PLAIN[$name]}" -v q="${PROFILE[$name]}" \
    'BEGIN { printf "| %s | %s | %d | %d | %.4f |\n", n, a, p, q, q / p }'
done

if [ -n "$check" ]; then
  echo
  echo "Determinism check (second run vs first):"
  echo
  echo "| workload | variant | run 1 Ir | run 2 Ir | difference |"
  echo "| --- | --- | ---: | ---: | ---: |"
  for name in $check; do
    [ -n "${PLAIN[$name]:-}" ] || { echo "check workload $name was not run" >&2; exit 1; }
    for variant in plain profile; do
      if [ "$variant" = plain ]; then first=${PLAIN[$name]}; else first=${PROFILE[$name]}; fi
      second=$(run "$name" "$variant" 2)
      diff=$((second - first))
      verdict="$diff"
      [ "$diff" -eq 0 ] && verdict="0 (identical)"
      echo "| $name | $variant | $first | $second | $verdict |"
    done
  done
fi
echo
echo "Wall time of this script: $(($(date +%s) - start)) s"
