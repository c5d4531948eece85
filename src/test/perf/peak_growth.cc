// A heap that sets a new peak all the time, one thread: every operation
// allocates a small block (16 to 512 bytes) and keeps it, and one in eight
// also frees a random kept block, so the live heap only grows (about 440
// MiB by the end of a default run) and each sample the profiler takes is
// at a new high: the worst case of its peak-heap tracking, which copies
// the live samples as the heap passes each new level.
// One operation = one allocation (and its share of the frees).
#include "block_stamp.h"
#include "fast_random.h"
#include "harness.h"

#include <vector>

namespace
{
  constexpr const char* NAME = "peak-growth";
} // namespace

int main(int argc, char** argv)
{
  bench::Options options = bench::parse_options(argc, argv, 2'000'000, 20'000);
  bench::FastRandom random(7);
  std::vector<bench::StampedBlock> kept;
  kept.reserve(options.ops);

  bench::Stopwatch stopwatch;
  for (uint64_t done = 0; done < options.ops; done++)
  {
    kept.push_back(bench::malloc_stamped(random.between(16, 512), NAME));
    if ((done & 7) == 7)
    {
      size_t i = random.below(kept.size());
      bench::free_verified(kept[i], NAME);
      kept[i] = kept.back();
      kept.pop_back();
    }
  }
  for (const bench::StampedBlock& k : kept)
    bench::free_verified(k, NAME);
  bench::Elapsed elapsed = stopwatch.elapsed();

  bench::report(NAME, 1, options.ops, elapsed);
  return 0;
}
