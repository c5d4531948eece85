// How long one thread's allocations stall while another gives memory back.
// A releaser thread, round after round, fills 80 blocks of 4 MiB and a
// chunk, writes a word of each page and frees them all: more freed memory
// left resident than an allocator keeps, so it is returned to the OS at
// once (ours: past 256 MiB, which the releaser's 64th free crosses) or at
// its decay.  Meanwhile an allocating thread takes and frees 256 KiB
// blocks, each a large allocation, and times each pair.  Reported: the
// pairs' throughput, and on a line of its own the longest pair, the 99.9th
// percentile and the pairs over 1 ms, in microseconds.
// One operation = one allocation and free on the allocating thread.
#include "block_stamp.h"
#include "harness.h"

#include <algorithm>
#include <atomic>

namespace
{
  constexpr const char* NAME = "decay-stall";
  constexpr size_t RELEASER_BLOCK = (size_t(4) << 20) + (size_t(16) << 10);
  constexpr size_t RELEASER_BLOCKS = 80;
  constexpr size_t PAIR_BLOCK = size_t(256) << 10;

  void release_rounds(uint64_t rounds)
  {
    std::vector<void*> blocks(RELEASER_BLOCKS);
    for (uint64_t r = 0; r < rounds; r++)
    {
      for (size_t i = 0; i < RELEASER_BLOCKS; i++)
      {
        blocks[i] = std::malloc(RELEASER_BLOCK);
        if (blocks[i] == nullptr)
          bench::fail("%s: malloc(%zu) failed", NAME, RELEASER_BLOCK);
        bench::stamp_block(blocks[i], RELEASER_BLOCK, 4096);
      }
      for (void* b : blocks)
      {
        bench::verify_block(b, RELEASER_BLOCK, NAME, 4096);
        std::free(b);
      }
    }
  }
} // namespace

int main(int argc, char** argv)
{
  // --ops: the releaser's rounds.
  bench::Options options = bench::parse_options(argc, argv, 8, 1);
  std::atomic<bool> done{false};
  // Pairs by their time in microseconds, the last bucket all from 100 ms.
  std::vector<uint64_t> by_us(100'001);
  uint64_t pairs = 0;
  double max_us = 0;

  bench::Stopwatch stopwatch;
  std::thread allocating([&] {
    while (!done.load(std::memory_order_acquire))
    {
      auto start = std::chrono::steady_clock::now();
      void* p = std::malloc(PAIR_BLOCK);
      if (p == nullptr)
        bench::fail("%s: malloc(%zu) failed", NAME, PAIR_BLOCK);
      bench::stamp_block(p, PAIR_BLOCK, 4096);
      bench::verify_block(p, PAIR_BLOCK, NAME, 4096);
      std::free(p);
      std::chrono::duration<double, std::micro> took = std::chrono::steady_clock::now() - start;
      double us = took.count();
      by_us[us < 100'000 ? size_t(us) : 100'000]++;
      max_us = us > max_us ? us : max_us;
      pairs++;
    }
  });
  release_rounds(options.ops);
  done.store(true, std::memory_order_release);
  allocating.join();
  bench::Elapsed elapsed = stopwatch.elapsed();

  if (pairs == 0)
    bench::fail("%s: the allocating thread made no pair", NAME);
  uint64_t seen = 0, over_1ms = 0;
  size_t p999_us = 0;
  for (size_t us = 0; us < by_us.size(); us++)
  {
    if (seen < pairs - pairs / 1000)
      p999_us = us;
    seen += by_us[us];
    if (us >= 1000)
      over_1ms += by_us[us];
  }
  bench::report(NAME, 2, pairs, elapsed);
  std::printf(
    "STALL name=%s pairs=%llu max_us=%.0f p999_us=%zu over_1ms=%llu\n",
    NAME,
    static_cast<unsigned long long>(pairs),
    max_us,
    p999_us,
    static_cast<unsigned long long>(over_1ms));
  return 0;
}
