#!/usr/bin/env bash
# The demo: builds the allocator with heap profiling, runs examples/holdmem
# (which holds memory at a few named functions and writes a heap profile),
# and shows the profile with `go tool pprof`: a top table on the terminal,
# an SVG call graph next to the profile, and the command that serves the
# interactive flame graph.
set -euo pipefail

repo_root=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$repo_root"

jobs=${JOBS:-2}
build_dir=build/on
demo_dir=build/demo
binary=$build_dir/examples/holdmem
profile=$demo_dir/holdmem.pb.gz
svg=$demo_dir/holdmem.svg

step() { echo; echo "==> $*"; }

step "installing what is missing"
bash scripts/setup.sh

step "building with -DSNMALLOC_PROFILE=ON in $build_dir"
cmake -S . -B "$build_dir" -DCMAKE_BUILD_TYPE=Release -DSNMALLOC_PROFILE=ON
cmake --build "$build_dir" -j "$jobs" --target holdmem

step "running holdmem"
mkdir -p "$demo_dir"
"$binary" "$profile"

step "go tool pprof -top $binary $profile"
go tool pprof -top "$binary" "$profile"

step "writing the call graph as SVG"
go tool pprof -svg -output "$svg" "$binary" "$profile"

cat <<SUMMARY

Profile:  $repo_root/$profile
SVG:      $repo_root/$svg   (open in a browser)
Binary:   $repo_root/$binary

Flame graph: run this, then open http://localhost:8080/ui/flamegraph
  go tool pprof -http=:8080 $repo_root/$binary $repo_root/$profile
Other views of the same profile:
  go tool pprof -sample_index=alloc_space -top $binary $profile    # all allocations, freed ones too
  go tool pprof -symbolize=force -list build_cache $binary $profile  # line by line, from the binary's debug info
SUMMARY
