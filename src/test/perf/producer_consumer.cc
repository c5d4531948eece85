// Producer/consumer: producer threads allocate, consumer threads free, so
// nearly every free is a cross-thread free.  Blocks travel in batches
// through one bounded queue; a full queue makes producers wait, so the
// memory in flight stays bounded.
//
// --threads N runs N/2 producers and N - N/2 consumers (at least one
// each).  One operation = one block allocated by a producer and freed by a
// consumer.  Built as perf-producer-consumer-delete (PERF_SIZED_DELETE),
// the blocks are a C++ program's: operator new, and the consumer's delete
// passes the size, as compilers do for a complete type.
#include "block_stamp.h"
#include "fast_random.h"
#include "harness.h"

#include <array>
#include <condition_variable>
#include <cstdlib>
#include <mutex>
#include <new>
#include <thread>
#include <vector>

namespace
{
  constexpr size_t batch_length = 64;
  constexpr size_t queue_batches = 16;

  struct Block
  {
    void* address;
    size_t size;
  };

  struct Batch
  {
    Block blocks[batch_length];
    size_t count = 0;
  };

  // A fixed ring of batches behind one lock: the lock is taken once per
  // batch, so the allocator, not the queue, dominates.  The ring is part
  // of the queue object, so the queue itself never calls malloc.
  class BoundedBatchQueue
  {
    std::mutex lock_;
    std::condition_variable not_empty_;
    std::condition_variable not_full_;
    std::array<Batch, queue_batches> ring_;
    size_t head_ = 0;
    size_t count_ = 0;
    unsigned producers_left_;

  public:
    explicit BoundedBatchQueue(unsigned producers) : producers_left_(producers) {}

    void push(const Batch& batch)
    {
      std::unique_lock<std::mutex> guard(lock_);
      not_full_.wait(guard, [&] { return count_ < queue_batches; });
      ring_[(head_ + count_) % queue_batches] = batch;
      count_++;
      not_empty_.notify_one();
    }

    // False once every producer has finished and the queue is empty.
    bool pop(Batch& batch)
    {
      std::unique_lock<std::mutex> guard(lock_);
      not_empty_.wait(guard, [&] { return count_ > 0 || producers_left_ == 0; });
      if (count_ == 0)
        return false;
      batch = ring_[head_];
      head_ = (head_ + 1) % queue_batches;
      count_--;
      not_full_.notify_one();
      return true;
    }

    void producer_finished()
    {
      std::lock_guard<std::mutex> guard(lock_);
      if (--producers_left_ == 0)
        not_empty_.notify_all();
    }
  };

#ifdef PERF_SIZED_DELETE
  constexpr const char* workload = "producer-consumer-delete";

  void* allocate(size_t size)
  {
    return ::operator new(size);
  }

  void release(void* address, size_t size)
  {
    ::operator delete(address, size);
  }
#else
  constexpr const char* workload = "producer-consumer";

  void* allocate(size_t size)
  {
    return std::malloc(size);
  }

  void release(void* address, size_t)
  {
    std::free(address);
  }
#endif

  // Sizes 16..511: each power-of-two band equally likely, so skewed to small.
  size_t message_size(bench::FastRandom& random)
  {
    size_t low = size_t{16} << random.below(5);
    return random.between(low, 2 * low - 1);
  }

  void produce(BoundedBatchQueue& queue, uint64_t blocks, uint64_t seed)
  {
    bench::FastRandom random(seed);
    Batch batch;
    for (uint64_t i = 0; i < blocks; i++)
    {
      size_t size = message_size(random);
      void* address = allocate(size);
      if (address == nullptr)
        bench::fail("%s: allocation of %zu bytes returned null", workload, size);
      bench::stamp_block(address, size);
      batch.blocks[batch.count++] = Block{address, size};
      if (batch.count == batch_length || i + 1 == blocks)
      {
        queue.push(batch);
        batch.count = 0;
      }
    }
    queue.producer_finished();
  }

  void consume(BoundedBatchQueue& queue)
  {
    Batch batch;
    while (queue.pop(batch))
    {
      for (size_t i = 0; i < batch.count; i++)
      {
        bench::verify_block(batch.blocks[i].address, batch.blocks[i].size, workload);
        release(batch.blocks[i].address, batch.blocks[i].size);
      }
    }
  }
} // namespace

int main(int argc, char** argv)
{
  bench::Options options = bench::parse_options(argc, argv, 8'000'000, 20'000);
  unsigned producers = options.threads / 2 > 0 ? options.threads / 2 : 1;
  unsigned consumers = options.threads > producers ? options.threads - producers : 1;
  uint64_t per_producer = options.ops / producers;

  BoundedBatchQueue queue(producers);
  bench::Stopwatch stopwatch;
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < producers; i++)
    threads.emplace_back(produce, std::ref(queue), per_producer, i + 1);
  for (unsigned i = 0; i < consumers; i++)
    threads.emplace_back(consume, std::ref(queue));
  for (std::thread& thread : threads)
    thread.join();
  bench::Elapsed elapsed = stopwatch.elapsed();

  bench::report(workload, producers + consumers, per_producer * producers, elapsed);
  return 0;
}
