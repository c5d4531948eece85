#!/usr/bin/env bash
# Instructions per warm 16-frame stack walk on aarch64, counted under
# qemu-user, for libgcc's _Unwind_Backtrace and libunwind's unw_backtrace.
#
# A tiny program (built with aarch64-linux-gnu-g++ -O2, no frame pointers)
# recurses 20 frames deep and walks up to 16 of them, WARM times and then
# N more times.  qemu-aarch64 -singlestep -d exec,nochain logs one line per
# guest instruction executed; the difference of the totals with N = 0 and
# N = 100, over 100, is one warm walk with start-up cancelled.  "first
# walk" is the total with WARM = 1 less the total with WARM = 0; "start-up"
# the whole process with no walk.  Counts are the emulated aarch64
# instructions, so they compare with each other, not with x86-64's.
#
# Usage: scripts/bench/qemu-walk-count.sh
# Needs: bash scripts/setup.sh --aarch64 (the cross compiler, qemu-user,
# Debian's arm64 libraries; without libunwind-dev:arm64 only libgcc is
# counted).
set -euo pipefail

triple=aarch64-linux-gnu
# Debian's arm64 libraries of multiarch, as cmake/toolchains/qemu-aarch64-run.sh.
emulator=(qemu-aarch64)
warm=50
measured=100

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

cat >"$work/walk.cc" <<'EOF'
#include <cstdio>
#include <cstdlib>
#include <unwind.h>
#ifdef USE_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

constexpr int MAX_FRAMES = 16;

struct Trace
{
  void** out;
  int n;
};

static _Unwind_Reason_Code add_frame(_Unwind_Context* context, void* arg)
{
  Trace* trace = static_cast<Trace*>(arg);
  if (trace->n == MAX_FRAMES)
    return _URC_END_OF_STACK;
  trace->out[trace->n++] = reinterpret_cast<void*>(_Unwind_GetIP(context));
  return _URC_NO_REASON;
}

__attribute__((noinline)) int walk(void** out)
{
#ifdef USE_LIBUNWIND
  return unw_backtrace(out, MAX_FRAMES);
#else
  Trace trace{out, 0};
  _Unwind_Backtrace(add_frame, &trace);
  return trace.n;
#endif
}

volatile int sink;

// Frames of their own below the walks: no tail call, no loop.
__attribute__((noinline)) int walk_at_depth(int depth, int walks)
{
  if (depth == 0)
  {
    int frames = 0;
    void* out[MAX_FRAMES];
    for (int i = 0; i < walks; i++)
      frames += walk(out);
    return frames;
  }
  int frames = walk_at_depth(depth - 1, walks);
  sink = frames;
  return frames;
}

int main(int argc, char** argv)
{
  if (argc != 3)
    return 2;
  int frames = walk_at_depth(20, atoi(argv[1]));
  frames += walk_at_depth(20, atoi(argv[2]));
  printf("%d\n", frames);
}
EOF

# instructions PROGRAM ARGS...: guest instructions of one run.
instructions() {
  "${emulator[@]}" -singlestep -d exec,nochain -D /dev/fd/3 "$@" 3>&1 >/dev/null |
    grep -c '^Trace'
}

walkers=(libgcc)
if [[ -e /usr/lib/$triple/libunwind.so ]]; then
  walkers+=(libunwind)
else
  echo "qemu-walk-count.sh: no libunwind-dev:arm64, counting libgcc only" >&2
fi

echo "| walker | warm walk | first walk | start-up |"
echo "| --- | ---: | ---: | ---: |"
for walker in "${walkers[@]}"; do
  flags=()
  [[ $walker == libunwind ]] && flags=(-DUSE_LIBUNWIND -lunwind)
  program="$work/walk-$walker"
  $triple-g++ -std=c++17 -O2 -fomit-frame-pointer "$work/walk.cc" -o "$program" "${flags[@]}"
  frames=$("${emulator[@]}" "$program" 1 0)
  if [[ $frames != 16 ]]; then
    echo "qemu-walk-count.sh: $walker walked $frames frames, not 16" >&2
    exit 1
  fi
  none=$(instructions "$program" 0 0)
  first=$(instructions "$program" 1 0)
  warmed=$(instructions "$program" "$warm" 0)
  more=$(instructions "$program" "$warm" "$measured")
  echo "| $walker | $(((more - warmed) / measured)) | $((first - none)) | $none |"
done
