// The cost of one stack walk by each walker, for callgrind: a chain of
// CHAIN frames (built -O2 without frame pointers) under main, at whose end
// the walker chosen by argv[1] (builtin, libgcc, libunwind) walks the
// stack once (first_walk: a process's first, tables cold) and then
// argv[2] times (repeated_walks).  Prints the frames each walk found
// (SIZE_MAX: the built-in walker would have fallen back).
//   valgrind --tool=callgrind --toggle-collect=repeated_walks perf-walk-cost builtin 1000
// gives instructions per warm walk as the total over 1000.
#include <snmalloc/profile/stacks/stack_capture.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace
{
  using Walker = size_t (*)(uintptr_t*, size_t);
  // With the walking function, main, and libc's three frames below it: a
  // 16-frame walk.
  constexpr int CHAIN = 11;
  constexpr size_t MAX = 64;
  volatile int sink;
} // namespace

extern "C" __attribute__((noinline)) size_t first_walk(Walker walk)
{
  uintptr_t out[MAX];
  return walk(out, MAX);
}

extern "C" __attribute__((noinline)) size_t repeated_walks(Walker walk, long times)
{
  uintptr_t out[MAX];
  size_t n = 0;
  for (long i = 0; i < times; i++)
    n = walk(out, MAX);
  return n;
}

__attribute__((noinline)) size_t chain(int level, Walker walk, long times)
{
  if (level > 1)
  {
    size_t n = chain(level - 1, walk, times);
    sink = int(n);
    return n;
  }
  size_t first = first_walk(walk);
  size_t n = repeated_walks(walk, times);
  std::printf("first walk %zu frames, warm walks %zu frames\n", first, n);
  return n;
}

int main(int argc, char** argv)
{
  if (argc != 3)
    return 2;
  // The built-in walker never falls back on these frames (checked below).
  Walker walk = std::strcmp(argv[1], "builtin") == 0 ? snmalloc::profile::walk_stack :
    std::strcmp(argv[1], "libgcc") == 0              ? snmalloc::profile::walk_stack_libgcc :
    std::strcmp(argv[1], "libunwind") == 0           ? snmalloc::profile::walk_stack_libunwind :
                                                       nullptr;
  if (walk == nullptr)
    return 2;
  size_t n = chain(CHAIN, walk, std::atol(argv[2]));
  return n == 0 || n == SIZE_MAX;
}
