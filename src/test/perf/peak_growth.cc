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

#include <cstdlib>
#include <vector>

namespace
{
  struct Kept
  {
    char* block;
    size_t size;
  };

  Kept allocate(bench::FastRandom& random)
  {
    size_t size = random.between(16, 512);
    auto* block = static_cast<char*>(std::malloc(size));
    if (block == nullptr)
      bench::fail("peak-growth: malloc(%zu) returned null", size);
    bench::stamp_block(block, size);
    return {block, size};
  }

  void release(const Kept& k)
  {
    bench::verify_block(k.block, k.size, "peak-growth");
    std::free(k.block);
  }
} // namespace

int main(int argc, char** argv)
{
  bench::Options options = bench::parse_options(argc, argv, 2'000'000, 20'000);
  bench::FastRandom random(7);
  std::vector<Kept> kept;
  kept.reserve(options.ops);

  bench::Stopwatch stopwatch;
  for (uint64_t done = 0; done < options.ops; done++)
  {
    kept.push_back(allocate(random));
    if ((done & 7) == 7)
    {
      size_t i = random.below(kept.size());
      release(kept[i]);
      kept[i] = kept.back();
      kept.pop_back();
    }
  }
  for (const Kept& k : kept)
    release(k);
  bench::Elapsed elapsed = stopwatch.elapsed();

  bench::report("peak-growth", 1, options.ops, elapsed);
  return 0;
}
