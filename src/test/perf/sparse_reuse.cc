// A full heap that frees here and there and allocates as much again, one
// thread: 1,000,000 blocks of 16 to 256 bytes are allocated and kept, then
// in each of 4 rounds every fifth block (a different fifth each round) is
// freed and then allocated again at its size.  The frees are spread over
// nearly every slab or page of the heap, so the peak RSS shows whether an
// allocator hands out the freed places again or takes new memory.
// One operation = one allocation of a round (the fill is not counted).
#include "block_stamp.h"
#include "fast_random.h"
#include "harness.h"

#include <vector>

namespace
{
  constexpr size_t ROUNDS = 4;
  constexpr size_t SPACING = 5;
  constexpr const char* NAME = "sparse-reuse";
} // namespace

int main(int argc, char** argv)
{
  // --ops is the number of blocks kept; the rounds allocate a fifth of
  // them each.
  bench::Options options = bench::parse_options(argc, argv, 1'000'000, 10'000);
  bench::FastRandom random(11);
  std::vector<bench::StampedBlock> kept = bench::malloc_stamped_heap(options.ops, random, 16, 256, NAME);

  bench::Stopwatch stopwatch;
  uint64_t allocations = 0;
  for (size_t round = 0; round < ROUNDS; round++)
  {
    size_t first = (round * 2) % SPACING;
    for (size_t i = first; i < kept.size(); i += SPACING)
      bench::free_verified(kept[i], NAME);
    for (size_t i = first; i < kept.size(); i += SPACING, allocations++)
      kept[i] = bench::malloc_stamped(kept[i].size, NAME);
  }
  bench::Elapsed elapsed = stopwatch.elapsed();
  for (const bench::StampedBlock& k : kept)
    bench::free_verified(k, NAME);

  bench::report(NAME, 1, allocations, elapsed);
  return 0;
}
