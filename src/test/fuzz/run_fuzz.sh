#!/usr/bin/env bash
# Builds a libFuzzer target with clang (address and undefined-behaviour
# sanitizers) and runs it for a bounded time, from a seed corpus.
#   run_fuzz.sh <clang++> <source dir> <target.cc> <seconds> [seed file...]
set -euo pipefail
clang=$1 src=$2 target=$3 seconds=$4
shift 4
work=$(mktemp -d)
trap 'rm -rf "$work" /tmp/snmalloc-elf-fuzz.*' EXIT
"$clang" -std=c++17 -O1 -g -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
  -I "$src/src" "$target" -o "$work/fuzz"
mkdir "$work/corpus"
for seed in "$@"; do cp "$seed" "$work/corpus/"; done
# The parser reports rejected input on stderr, once per run: keep it out
# of the log unless the fuzzer fails.
if ! "$work/fuzz" -max_total_time="$seconds" -rss_limit_mb=1024 -artifact_prefix="$work/" \
  "$work/corpus" >"$work/log" 2>&1; then
  tail -60 "$work/log"
  echo "FAIL: $(basename "$target") found a crash"
  exit 1
fi
grep -E "^Done [0-9]+ runs" "$work/log" || true
echo "ok: $(basename "$target") ran ${seconds}s without a crash"
