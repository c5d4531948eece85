// Thread-local churn on several threads at once, in the manner of glibc's
// bench-malloc-thread: each thread keeps its own working set of blocks and
// replaces a random one per operation, with sizes from 16 bytes to 32 KiB
// drawn with density proportional to 1/size (most small, a long tail).
// No block crosses threads: what is measured is how well the threads'
// allocators keep out of each other's way (shared locks, shared lines).
//
// One operation = one free and one malloc.
#include "block_stamp.h"
#include "fast_random.h"
#include "harness.h"

#include <cmath>
#include <cstdlib>
#include <vector>

namespace
{
  constexpr size_t working_set = 4096;
  constexpr double min_size = 16;
  constexpr double max_size = 32768;
  // As in glibc's benchmark, the program itself should cost little: sizes
  // come from a precomputed table and blocks are stamped sparsely.
  constexpr size_t stamp_stride = 4096;
  constexpr size_t size_table_length = 1 << 16;

  using Block = bench::StampedBlock;

  // Log-uniform: density proportional to 1/size.
  std::vector<size_t> make_size_table()
  {
    std::vector<size_t> table(size_table_length);
    for (size_t i = 0; i < size_table_length; i++)
    {
      double u = static_cast<double>(i) / size_table_length;
      table[i] = static_cast<size_t>(min_size * std::pow(max_size / min_size, u));
    }
    return table;
  }

  const std::vector<size_t> size_table = make_size_table();

  void fill(Block& block, bench::FastRandom& random)
  {
    size_t size = size_table[random.below(size_table_length)];
    block = bench::malloc_stamped(size, "thread-churn", stamp_stride);
  }

  void release(const Block& block)
  {
    bench::free_verified(block, "thread-churn", stamp_stride);
  }

  void worker(uint64_t ops, unsigned self)
  {
    bench::FastRandom random(self + 1);
    std::vector<Block> blocks(working_set);
    for (Block& block : blocks)
      fill(block, random);
    for (uint64_t op = 0; op < ops; op++)
    {
      Block& block = blocks[random.below(working_set)];
      release(block);
      fill(block, random);
    }
    for (Block& block : blocks)
      release(block);
  }
} // namespace

int main(int argc, char** argv)
{
  bench::Options options = bench::parse_options(argc, argv, 8'000'000, 20'000);
  uint64_t per_thread = options.ops / options.threads;

  bench::Elapsed elapsed =
    bench::run_threads(options.threads, [&](unsigned i) { worker(per_thread, i); });

  bench::report("thread-churn", options.threads, per_thread * options.threads, elapsed);
  return 0;
}
