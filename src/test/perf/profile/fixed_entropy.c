/* Preloaded before a shim: getrandom() returns a stream fixed by
   SNMALLOC_BENCH_SEED (default 1), so the profiler's sample points fall in
   the same places from run to run.  Which objects are sampled moves the
   instruction counts of a profiled run (on perf-large-churn, where the
   sampled runs are placed, by over 1%); the median over a few seeds is
   then a figure a reader can reproduce exactly.  One thread's runs only:
   threads that seed in a varying order get varying streams (the state is
   shared and unsynchronised). */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdlib.h>
#include <sys/random.h>
#include <sys/types.h>

static uint64_t state;
static int seeded;

ssize_t getrandom(void* buffer, size_t length, unsigned int flags)
{
  (void)flags;
  if (!seeded)
  {
    const char* seed = getenv("SNMALLOC_BENCH_SEED");
    state = seed != NULL ? strtoull(seed, NULL, 0) : 1;
    seeded = 1;
  }
  unsigned char* out = buffer;
  for (size_t i = 0; i < length; i++)
  {
    /* A 64-bit linear congruential step (Knuth's MMIX constants); the
       top byte, whose period is the generator's. */
    state = state * 6364136223846793005u + 1442695040888963407u;
    out[i] = (unsigned char)(state >> 56);
  }
  return (ssize_t)length;
}
