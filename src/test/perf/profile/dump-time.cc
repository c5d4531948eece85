// Time to write a profile: 100,000 live samples (every allocation sampled)
// over 5,000 distinct stacks of about 64 frames, then dump() three times,
// each timed end to end (symbolization, encoding, gzip, write).  Needs a
// profiling build; see docs/performance.md.
#include <snmalloc/snmalloc.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace
{
  std::vector<void*> keep;

  __attribute__((noinline)) void leaf()
  {
    keep.push_back(std::malloc(64));
    asm volatile("" ::: "memory");
  }

  __attribute__((noinline)) void b(int id, int depth);

  // a and b call each other along a path chosen by the bits of `id`, so
  // each id gets a stack of its own, `depth` frames deep.
  __attribute__((noinline)) void a(int id, int depth)
  {
    if (depth == 0)
      leaf();
    else if ((id >> (depth % 13)) & 1)
      b(id, depth - 1);
    else
      a(id, depth - 1);
    asm volatile("" ::: "memory");
  }

  void b(int id, int depth)
  {
    if (depth == 0)
      leaf();
    else if ((id >> (depth % 13)) & 1)
      a(id, depth - 1);
    else
      b(id, depth - 1);
    asm volatile("" ::: "memory");
  }
} // namespace

int main(int argc, char** argv)
{
  const char* path = argc > 1 ? argv[1] : "dump-time.pb.gz";
  keep.reserve(200000);
  snmalloc::profile::start(1);
  for (int i = 0; i < 100000; i++)
    a(i % 5000, 70);
  snmalloc::profile::stop();
  for (int rep = 0; rep < 3; rep++)
  {
    auto t0 = std::chrono::steady_clock::now();
    auto r = snmalloc::profile::dump(path);
    auto t1 = std::chrono::steady_clock::now();
    std::printf(
      "RESULT name=dump-time dump=%d status=%s ms=%.1f\n",
      rep,
      r.message(),
      std::chrono::duration<double, std::milli>(t1 - t0).count());
    if (!r.ok())
      return 1;
  }
  return 0;
}
