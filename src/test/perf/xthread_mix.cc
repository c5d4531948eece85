// Cross-thread mix in rounds: each thread keeps a set of slots holding
// blocks of random sizes (8..16,000 bytes) and, per operation, allocates
// into an empty slot or frees or reallocs a full one.  Between rounds the
// threads pass their whole slot sets on to the next thread, so most frees
// and reallocs land on blocks another thread allocated.
//
// One operation = one malloc, free or realloc.
#include "block_stamp.h"
#include "fast_random.h"
#include "harness.h"

#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace
{
  constexpr size_t slot_count = 1024;
  constexpr size_t min_size = 8;
  constexpr size_t max_size = 16'000;
  constexpr uint64_t rounds = 20;
  // Sparse stamps: a check every 64 bytes made the stamping 98% of the
  // instructions (callgrind), hiding the allocators.
  constexpr size_t stamp_stride = 1024;

  using Block = bench::StampedBlock;
  using Slots = std::vector<Block>;

  // All threads wait here between rounds; allocation-free, and asleep:
  // a wait by sched_yield was counted as CPU time (perf: 5-9% of the
  // samples in the kernel's yield, more or less with each run's imbalance
  // between the threads), so ops per CPU-second measured the scheduler as
  // much as the allocator.
  class RoundBarrier
  {
    std::mutex lock_;
    std::condition_variable round_over_;
    unsigned waiting_ = 0;
    uint64_t generation_ = 0;
    unsigned threads_;

  public:
    explicit RoundBarrier(unsigned threads) : threads_(threads) {}

    void wait()
    {
      std::unique_lock<std::mutex> hold(lock_);
      uint64_t generation = generation_;
      if (++waiting_ == threads_)
      {
        waiting_ = 0;
        generation_++;
        round_over_.notify_all();
        return;
      }
      round_over_.wait(hold, [&] { return generation_ != generation; });
    }
  };

  size_t random_size(bench::FastRandom& random)
  {
    return random.between(min_size, max_size);
  }

  void fill(Block& slot, bench::FastRandom& random)
  {
    slot = bench::malloc_stamped(random_size(random), "xthread-mix", stamp_stride);
  }

  void release(Block& slot)
  {
    bench::free_verified(slot, "xthread-mix", stamp_stride);
    slot = Block{};
  }

  // realloc must keep the first min(old, new) bytes: the first stamped
  // word is checked after the move, the whole block is restamped.
  void resize(Block& slot, bench::FastRandom& random)
  {
    bench::verify_block(slot.address, slot.size, "xthread-mix", stamp_stride);
    uint64_t first_word;
    std::memcpy(&first_word, slot.address, sizeof(first_word));
    size_t size = random_size(random);
    void* address = std::realloc(slot.address, size);
    if (address == nullptr)
      bench::fail("xthread-mix: realloc(%zu) returned null", size);
    if (std::memcmp(address, &first_word, sizeof(first_word)) != 0)
      bench::fail("xthread-mix: realloc to %zu bytes lost the contents", size);
    bench::stamp_block(address, size, stamp_stride);
    slot = Block{address, size};
  }

  struct Shared
  {
    std::vector<Slots> slots; // one set per thread, passed on each round
    RoundBarrier barrier;
    uint64_t ops_per_round;
  };

  void worker(Shared& shared, unsigned self)
  {
    unsigned threads = static_cast<unsigned>(shared.slots.size());
    bench::FastRandom random(self + 1);
    for (uint64_t round = 0; round < rounds; round++)
    {
      Slots& mine = shared.slots[(self + round) % threads];
      for (uint64_t op = 0; op < shared.ops_per_round; op++)
      {
        Block& slot = mine[random.below(slot_count)];
        if (slot.address == nullptr)
          fill(slot, random);
        else if (random.below(4) == 0)
          resize(slot, random);
        else
          release(slot);
      }
      shared.barrier.wait();
    }
  }
} // namespace

int main(int argc, char** argv)
{
  bench::Options options = bench::parse_options(argc, argv, 4'000'000, 20'000);
  uint64_t per_round = options.ops / options.threads / rounds;
  if (per_round == 0)
    per_round = 1;
  Shared shared{
    std::vector<Slots>(options.threads, Slots(slot_count)), RoundBarrier(options.threads), per_round};

  bench::Elapsed elapsed =
    bench::run_threads(options.threads, [&](unsigned i) { worker(shared, i); });

  for (Slots& set : shared.slots)
    for (Block& slot : set)
      if (slot.address != nullptr)
        release(slot);
  bench::report("xthread-mix", options.threads, per_round * rounds * options.threads, elapsed);
  return 0;
}
