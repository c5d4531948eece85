// calloc churn, one thread: the zeroing calloc adds to the fast paths.
//
// A long-lived set of blocks of 8 to 512 bytes; each operation frees a
// random one and callocs its replacement, which must read as zero where
// its stamps go (a word per 64 bytes and the last) before it is stamped
// and, at its free, verified.  One operation = one calloc and its free.
#include "block_stamp.h"
#include "fast_random.h"
#include "harness.h"

#include <cstdlib>
#include <vector>

namespace
{
  constexpr size_t live_slots = 4096;

  struct Slot
  {
    char* block = nullptr;
    size_t size = 0;
  };

  void fill(Slot& slot, size_t size)
  {
    slot.block = static_cast<char*>(std::calloc(1, size));
    if (slot.block == nullptr)
      bench::fail("calloc-churn: calloc(1, %zu) returned null", size);
    slot.size = size;
    bench::for_each_stamp_offset(size, 64, [&](size_t offset) {
      uint64_t word = 0;
      std::memcpy(&word, slot.block + offset, size < sizeof(word) ? size : sizeof(word));
      if (word != 0)
        bench::fail("calloc-churn: calloc(1, %zu) gave %p, not zero at offset %zu", size,
          static_cast<void*>(slot.block), offset);
    });
    bench::stamp_block(slot.block, size);
  }

  void release(Slot& slot)
  {
    bench::verify_block(slot.block, slot.size, "calloc-churn");
    std::free(slot.block);
  }
} // namespace

int main(int argc, char** argv)
{
  bench::Options options = bench::parse_options(argc, argv, 20'000'000, 20'000);
  bench::FastRandom random(1);
  std::vector<Slot> live(live_slots);

  bench::Stopwatch stopwatch;
  for (Slot& slot : live)
    fill(slot, random.between(8, 512));
  for (uint64_t done = 0; done < options.ops; done++)
  {
    Slot& slot = live[random.below(live_slots)];
    release(slot);
    fill(slot, random.between(8, 512));
  }
  for (Slot& slot : live)
    release(slot);
  bench::Elapsed elapsed = stopwatch.elapsed();

  bench::report("calloc-churn", 1, options.ops, elapsed);
  return 0;
}
