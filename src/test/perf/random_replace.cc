// Refill-heavy churn, one thread: 20,000 live objects of 16..1024 bytes,
// uniform, and each operation frees a random one and allocates its
// replacement.  Frees scatter over many slabs, so refills find short free
// lists and the slow path runs often: the workload that shows what
// profiling adds per refill (churn.cc, 4096 live objects and bursts freed
// in reverse order, refills too seldom to show it).  One operation = one
// free and one allocation.
#include "block_stamp.h"
#include "fast_random.h"
#include "harness.h"

#include <cstdlib>
#include <vector>

namespace
{
  constexpr size_t live_slots = 20'000;
  // The first and last word of each block: enough to catch overlaps, and
  // cheap, so the allocator dominates the time.
  constexpr size_t stamp_stride = 4096;

  struct Slot
  {
    char* block = nullptr;
    size_t size = 0;
  };

  void fill(Slot& slot, bench::FastRandom& random)
  {
    slot.size = random.between(16, 1024);
    slot.block = static_cast<char*>(std::malloc(slot.size));
    if (slot.block == nullptr)
      bench::fail("random-replace: malloc(%zu) returned null", slot.size);
    bench::stamp_block(slot.block, slot.size, stamp_stride);
  }

  void release(Slot& slot)
  {
    bench::verify_block(slot.block, slot.size, "random-replace", stamp_stride);
    std::free(slot.block);
  }
} // namespace

int main(int argc, char** argv)
{
  bench::Options options = bench::parse_options(argc, argv, 20'000'000, 50'000);
  bench::FastRandom random(1);
  std::vector<Slot> live(live_slots);

  bench::Stopwatch stopwatch;
  for (Slot& slot : live)
    fill(slot, random);
  for (uint64_t done = 0; done < options.ops; done++)
  {
    Slot& slot = live[random.below(live_slots)];
    release(slot);
    fill(slot, random);
  }
  for (Slot& slot : live)
    release(slot);
  bench::Elapsed elapsed = stopwatch.elapsed();

  bench::report("random-replace", 1, options.ops, elapsed);
  return 0;
}
