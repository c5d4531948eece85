// A heap freed whole, one thread: 2,000,000 blocks of 16 to 256 bytes are
// allocated and kept, then all freed in random order, as when a large hash
// table or tree is destroyed.  Most frees reach a slab or page long out of
// cache, and each slab empties at a moment of its own.
// One operation = one free (the fill is not counted).
#include "block_stamp.h"
#include "fast_random.h"
#include "harness.h"

#include <utility>
#include <vector>

namespace
{
  constexpr const char* NAME = "free-all";
} // namespace

int main(int argc, char** argv)
{
  bench::Options options = bench::parse_options(argc, argv, 2'000'000, 20'000);
  bench::FastRandom random(13);
  std::vector<bench::StampedBlock> kept = bench::malloc_stamped_heap(options.ops, random, 16, 256, NAME);
  for (size_t i = kept.size(); i > 1; i--)
    std::swap(kept[i - 1], kept[random.below(i)]);

  bench::Stopwatch stopwatch;
  for (const bench::StampedBlock& k : kept)
    bench::free_verified(k, NAME);
  bench::Elapsed elapsed = stopwatch.elapsed();

  bench::report(NAME, 1, options.ops, elapsed);
  return 0;
}
