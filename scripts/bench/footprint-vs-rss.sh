#!/usr/bin/env bash
# The footprint profile's total against VmRSS on the benchmarks
# (src/test/perf): each run under the profiling shim with
# SNMALLOC_PROFILE=footprint_path=..., the footprint written at exit; its
# comment holds the rows' total and VmRSS read at the same moment.  Prints a
# markdown table: workload, footprint MiB, VmRSS MiB, difference.
#
#   bash scripts/bench/footprint-vs-rss.sh [BUILD_DIR]   (default build/on)
set -uo pipefail
out_dir=$(mktemp -d)
trap 'rm -rf "$out_dir"' EXIT
echo "| workload | footprint MiB | VmRSS MiB | difference |"
echo "| --- | --- | --- | --- |"
build=$(realpath "${1:-build/on}")
go=$(command -v go || echo /usr/lib/go/bin/go)
for w in churn random-replace producer-consumer larson large-churn realloc-growth xthread-mix thread-churn producer-freer peak-growth calloc-churn copy-mix; do
  out=$out_dir/$w.pb.gz
  SNMALLOC_PROFILE=footprint_path=$out timeout 300 env LD_PRELOAD=$build/libsnmallocshim-profile.so $build/src/test/perf/perf-$w >/dev/null 2>&1
  line=$("$go" tool pprof -raw "$out" 2>/dev/null | grep -m1 "resident rows total")
  python3 - "$w" "$line" <<'PY'
import re, sys
workload, comment = sys.argv[1:]
found = re.search(r"total (\d+) bytes; VmRSS (\d+)", comment)
if not found:
    sys.exit(f"{workload}: no footprint profile")
total, rss = map(int, found.groups())
print(f"| {workload} | {total / 2**20:.1f} | {rss / 2**20:.1f} | {100 * (total - rss) / rss:+.2f}% |")
PY
done
