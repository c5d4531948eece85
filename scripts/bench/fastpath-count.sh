#!/usr/bin/env bash
# Instructions per malloc(32)/free pair, counted by callgrind.
#
# A tiny program runs N malloc(32)/free pairs in a loop; it is run under
# callgrind with N = 100000 and N = 200000 and the difference of the two
# instruction totals, divided by 100000, is the cost of one pair with all
# start-up cost cancelled.  The loop's own instructions (main's self cost,
# about ten a pair) are reported apart, so "allocator" is malloc + free.
#
# Usage: [FORM=sized] scripts/bench/fastpath-count.sh [ALLOCATOR...]
#   FORM=sized: the pairs are operator new(32) / operator delete(p, 32), the
#   sized delete C++ programs call, instead of malloc/free.
#   ALLOCATOR is a shared library to LD_PRELOAD, or "glibc" for none.
#   Default: glibc, jemalloc, mimalloc, tcmalloc_minimal, and the shims of
#   the build tree $BUILD (default /work/main/build) that exist there.
#
# LD_PRELOAD set on valgrind reaches the client program: valgrind appends
# its own preloads to the variable instead of replacing it, and callgrind
# (unlike memcheck) does not replace malloc itself.
set -euo pipefail

build=${BUILD:-/work/main/build}
system_lib=/usr/lib/x86_64-linux-gnu
small=100000
large=200000

if [ $# -eq 0 ]; then
  set -- glibc "$system_lib/libjemalloc.so.2" "$system_lib/libmimalloc.so.2" \
    "$system_lib/libtcmalloc_minimal.so.4"
  for shim in "$build/libsnmallocshim.so" "$build/libsnmallocshim-profile.so"; do
    if [ -e "$shim" ]; then set -- "$@" "$shim"; fi
  done
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/pairs.c" <<'EOF'
#include <stdlib.h>

int main(int argc, char** argv)
{
  long pairs = argc > 1 ? atol(argv[1]) : 100000;
  /* The volatile store keeps the compiler from pairing up and deleting
     the malloc/free calls. */
  void* volatile sink;
  for (long i = 0; i < pairs; i++)
  {
    void* block = malloc(32);
    sink = block;
    free(block);
  }
  (void)sink;
  return 0;
}
EOF
cat >"$work/pairs.cc" <<'EOF'
#include <cstdlib>
#include <new>

int main(int argc, char** argv)
{
  long pairs = argc > 1 ? std::atol(argv[1]) : 100000;
  void* volatile sink;
  for (long i = 0; i < pairs; i++)
  {
    void* block = ::operator new(32);
    sink = block;
    ::operator delete(block, 32);
  }
  (void)sink;
  return 0;
}
EOF
if [ "${FORM:-}" = sized ]; then
  c++ -O2 -fno-builtin -fsized-deallocation -o "$work/pairs" "$work/pairs.cc"
else
  cc -O2 -fno-builtin -o "$work/pairs" "$work/pairs.c"
fi

# count PRELOAD N OUT: runs the loop under callgrind, prints the total.
count() {
  local preload=$1 pairs=$2 out=$3
  env ${preload:+LD_PRELOAD="$preload"} valgrind --tool=callgrind \
    --callgrind-out-file="$out" "$work/pairs" "$pairs" 2>"$out.log" ||
    { cat "$out.log" >&2; return 1; }
  sed -n 's/^==[0-9]*== Collected : \([0-9]*\)$/\1/p' "$out.log"
}

# main_self OUT: instructions spent in the loop itself.
main_self() {
  callgrind_annotate "$1" 2>/dev/null |
    sed -n 's/^ *\([0-9,]*\) .*:main \[.*pairs\]$/\1/p' | tr -d , | head -1
}

printf '| allocator | instructions per pair (loop included) | loop | allocator (malloc+free) |\n'
printf '| --- | ---: | ---: | ---: |\n'
for allocator in "$@"; do
  preload=$allocator
  if [ "$allocator" = glibc ]; then
    preload=
  elif [ ! -e "$allocator" ]; then
    echo "skipping $allocator: not found" >&2
    continue
  fi
  total_small=$(count "$preload" $small "$work/small.out")
  total_large=$(count "$preload" $large "$work/large.out")
  loop_small=$(main_self "$work/small.out")
  loop_large=$(main_self "$work/large.out")
  span=$((large - small))
  awk -v name="$(basename "$allocator")" -v t=$((total_large - total_small)) \
    -v l=$((loop_large - loop_small)) -v n=$span \
    'BEGIN { printf "| %s | %.1f | %.1f | %.1f |\n", name, t / n, l / n, (t - l) / n }'
done
