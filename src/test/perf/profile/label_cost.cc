// What allocation labels cost, read under callgrind (docs/performance.md):
//   perf-label-cost push N      N push/pop pairs of a label through the C++
//                               API (inlined), alternating between two
//                               values
//   perf-label-cost push-c N    the same through the C functions, a call
//                               each, as C and Rust make them
//   perf-label-cost sample N [labelled|relabelled]
//                               N allocations of 64 bytes, every one
//                               sampled (rate=1) and freed at once, on a
//                               fresh thread: with no label, with one label
//                               set before them all (labelled), or each
//                               under its own push and pop alternating
//                               between two values, so that every sample
//                               finds its set changed (relabelled); the
//                               difference of two runs' totals over N is
//                               what a sample's labels cost
//   perf-label-cost clock N     N reads of the clock a sample reads
//                               (CLOCK_MONOTONIC), for its cost per read
// Needs a profiling build.
#include <snmalloc/snmalloc.h>
#include <snmalloc/snmalloc_profile.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace
{
  const char* alternating_value(long i)
  {
    return (i & 1) != 0 ? "acme" : "beta";
  }

  __attribute__((noinline)) void churn(long n, bool relabelled)
  {
    for (long i = 0; i < n; i++)
    {
      if (relabelled)
        snmalloc_profile_label_push("tenant", alternating_value(i));
      void* p = std::malloc(64);
      asm volatile("" : : "r"(p) : "memory");
      std::free(p);
      if (relabelled)
        snmalloc_profile_label_pop();
    }
  }
} // namespace

int main(int argc, char** argv)
{
  if (argc < 3)
  {
    std::fprintf(stderr, "usage: %s push|push-c|sample|clock N [labelled|relabelled]\n", argv[0]);
    return 2;
  }
  long n = std::atol(argv[2]);
  if (std::strcmp(argv[1], "push") == 0)
  {
    for (long i = 0; i < n; i++)
    {
      snmalloc::profile::push_label("tenant", alternating_value(i));
      snmalloc::profile::pop_label();
    }
    std::printf("RESULT name=label-push pairs=%ld\n", n);
    return 0;
  }
  if (std::strcmp(argv[1], "push-c") == 0)
  {
    for (long i = 0; i < n; i++)
    {
      snmalloc_profile_label_push("tenant", alternating_value(i));
      snmalloc_profile_label_pop();
    }
    std::printf("RESULT name=label-push-c pairs=%ld\n", n);
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
  const char* labels = argc > 3 ? argv[3] : "none";
  bool labelled = std::strcmp(labels, "labelled") == 0;
  bool relabelled = std::strcmp(labels, "relabelled") == 0;
  snmalloc::profile::start(1);
  std::thread([&] {
    if (labelled)
      snmalloc::profile::push_label("tenant", "acme");
    churn(n, relabelled);
  }).join();
  snmalloc::profile::stop();
  std::printf("RESULT name=label-sample samples=%ld labels=%s\n", n, labels);
  return 0;
}
