// What allocation labels cost, read under callgrind (docs/performance.md):
//   perf-label-cost push N      N push/pop pairs of a label, alternating
//                               between two values (each push a lookup of
//                               an interned set)
//   perf-label-cost sample N [labelled]
//                               N allocations of 64 bytes, every one
//                               sampled (rate=1) and freed at once, on a
//                               fresh thread, with a label set (labelled)
//                               or none; the difference of two runs' totals
//                               over N is what a sample's label costs
//   perf-label-cost clock N     N reads of the clock a sample reads
//                               (CLOCK_MONOTONIC), for its cost per read
// Needs a profiling build.
#include <snmalloc/snmalloc.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace
{
  __attribute__((noinline)) void churn(long n)
  {
    for (long i = 0; i < n; i++)
    {
      void* p = std::malloc(64);
      asm volatile("" : : "r"(p) : "memory");
      std::free(p);
    }
  }
} // namespace

int main(int argc, char** argv)
{
  if (argc < 3)
  {
    std::fprintf(stderr, "usage: %s push|sample|clock N [labelled]\n", argv[0]);
    return 2;
  }
  long n = std::atol(argv[2]);
  if (std::strcmp(argv[1], "push") == 0)
  {
    for (long i = 0; i < n; i++)
    {
      snmalloc::profile::push_label("tenant", (i & 1) != 0 ? "acme" : "beta");
      snmalloc::profile::pop_label();
    }
    std::printf("RESULT name=label-push pairs=%ld\n", n);
    return 0;
  }
  if (std::strcmp(argv[1], "clock") == 0)
  {
    int64_t sum = 0;
    for (long i = 0; i < n; i++)
      sum += snmalloc::Pal::precise_monotonic_ns();
    std::printf("RESULT name=clock-read reads=%ld sum=%lld\n", n, static_cast<long long>(sum));
    return 0;
  }
  bool labelled = argc > 3 && std::strcmp(argv[3], "labelled") == 0;
  snmalloc::profile::start(1);
  std::thread([&] {
    if (labelled)
      snmalloc::profile::push_label("tenant", "acme");
    churn(n);
  }).join();
  snmalloc::profile::stop();
  std::printf("RESULT name=label-sample samples=%ld labelled=%d\n", n, int(labelled));
  return 0;
}
