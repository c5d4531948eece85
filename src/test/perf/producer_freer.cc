// Every thread allocates and every thread frees, but never its own
// objects: thread i allocates batches of small blocks and hands each batch
// to thread i+1 (in a ring), which frees it.  Unlike producer-consumer,
// where half the threads only allocate and half only free, each thread's
// allocator here both fills slabs and receives the remote frees of another
// thread's, the shape of xmalloc-style tests.
//
// --threads N runs N threads (at least 2).  One operation = one block
// allocated on one thread and freed on another.
#include "block_stamp.h"
#include "fast_random.h"
#include "harness.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <thread>
#include <vector>

namespace
{
  constexpr size_t batch_length = 128;
  // Batches waiting in one inbox; a full inbox makes its sender free its
  // own inbox first, so the blocks in flight stay bounded and the ring
  // cannot deadlock.
  constexpr size_t inbox_batches = 8;

  struct Batch
  {
    void* blocks[batch_length];
    uint32_t sizes[batch_length];
    size_t count = 0;
  };

  class Inbox
  {
    std::mutex lock_;
    std::array<Batch, inbox_batches> ring_;
    size_t head_ = 0;
    size_t count_ = 0;

  public:
    bool try_push(const Batch& batch)
    {
      std::lock_guard<std::mutex> guard(lock_);
      if (count_ == inbox_batches)
        return false;
      ring_[(head_ + count_) % inbox_batches] = batch;
      count_++;
      return true;
    }

    bool try_pop(Batch& batch)
    {
      std::lock_guard<std::mutex> guard(lock_);
      if (count_ == 0)
        return false;
      batch = ring_[head_];
      head_ = (head_ + 1) % inbox_batches;
      count_--;
      return true;
    }
  };

  // Sizes 8..256, each power-of-two band equally likely.
  size_t block_size(bench::FastRandom& random)
  {
    size_t low = size_t{8} << random.below(5);
    return random.between(low, 2 * low);
  }

  struct Ring
  {
    std::vector<Inbox> inboxes;
    std::atomic<unsigned> producing;

    explicit Ring(unsigned threads) : inboxes(threads), producing(threads) {}
  };

  // Frees every batch waiting for `self`; true if there was one.
  bool free_inbox(Inbox& inbox)
  {
    Batch batch;
    bool any = false;
    while (inbox.try_pop(batch))
    {
      for (size_t i = 0; i < batch.count; i++)
      {
        bench::verify_block(batch.blocks[i], batch.sizes[i], "producer-freer");
        std::free(batch.blocks[i]);
      }
      any = true;
    }
    return any;
  }

  void run(Ring& ring, unsigned self, uint64_t blocks)
  {
    unsigned threads = static_cast<unsigned>(ring.inboxes.size());
    Inbox& mine = ring.inboxes[self];
    Inbox& next = ring.inboxes[(self + 1) % threads];
    bench::FastRandom random(self + 1);
    Batch batch;
    for (uint64_t done = 0; done < blocks;)
    {
      batch.count = 0;
      for (; batch.count < batch_length && done < blocks; done++)
      {
        size_t size = block_size(random);
        void* block = std::malloc(size);
        if (block == nullptr)
          bench::fail("producer-freer: malloc(%zu) returned null", size);
        bench::stamp_block(block, size);
        batch.blocks[batch.count] = block;
        batch.sizes[batch.count++] = static_cast<uint32_t>(size);
      }
      while (!next.try_push(batch))
      {
        if (!free_inbox(mine))
          std::this_thread::yield();
      }
      free_inbox(mine);
    }
    ring.producing.fetch_sub(1, std::memory_order_acq_rel);
    // The previous thread may still be sending.
    while (ring.producing.load(std::memory_order_acquire) != 0)
    {
      if (!free_inbox(mine))
        std::this_thread::yield();
    }
    free_inbox(mine);
  }
} // namespace

int main(int argc, char** argv)
{
  bench::Options options = bench::parse_options(argc, argv, 20'000'000, 50'000);
  unsigned threads = options.threads < 2 ? 2 : options.threads;
  uint64_t per_thread = options.ops / threads;
  Ring ring(threads);
  bench::Elapsed elapsed =
    bench::run_threads(threads, [&](unsigned self) { run(ring, self, per_thread); });
  bench::report("producer-freer", threads, per_thread * threads, elapsed);
  return 0;
}
