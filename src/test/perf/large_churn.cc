// Large-allocation churn: a live set of 64 blocks of 64 KiB .. 4 MiB
// (log-uniform), random slots replaced.  Every page of each block is
// written, so the cost of getting memory from the OS and of returning it
// (or of keeping it) shows in both the time and the peak RSS.
//
// One operation = one slot replaced (a free and a malloc).
#include "block_stamp.h"
#include "fast_random.h"
#include "harness.h"

#include <cmath>
#include <cstdlib>
#include <vector>

namespace
{
  constexpr size_t live_slots = 64;
  constexpr size_t page = 4096;
  constexpr double min_log2_size = 16; // 64 KiB
  constexpr double max_log2_size = 22; // 4 MiB

  struct Block
  {
    void* address = nullptr;
    size_t size = 0;
  };

  size_t large_size(bench::FastRandom& random)
  {
    double unit = static_cast<double>(random.next() >> 11) / 9007199254740992.0;
    return static_cast<size_t>(std::exp2(min_log2_size + unit * (max_log2_size - min_log2_size)));
  }

  Block new_block(bench::FastRandom& random)
  {
    size_t size = large_size(random);
    void* address = std::malloc(size);
    if (address == nullptr)
      bench::fail("large-churn: malloc(%zu) returned null", size);
    bench::stamp_block(address, size, page);
    return Block{address, size};
  }

  void free_block(const Block& block)
  {
    bench::verify_block(block.address, block.size, "large-churn", page);
    std::free(block.address);
  }
} // namespace

int main(int argc, char** argv)
{
  bench::Options options = bench::parse_options(argc, argv, 40'000, 200);
  bench::FastRandom random(1);
  std::vector<Block> live(live_slots);

  bench::Stopwatch stopwatch;
  for (Block& slot : live)
    slot = new_block(random);
  for (uint64_t op = 0; op < options.ops; op++)
  {
    Block& slot = live[random.below(live_slots)];
    free_block(slot);
    slot = new_block(random);
  }
  for (const Block& slot : live)
    free_block(slot);
  bench::Elapsed elapsed = stopwatch.elapsed();

  bench::report("large-churn", 1, options.ops, elapsed);
  return 0;
}
