// Multi-threaded stress: blocks move between threads through producer /
// consumer queues and all-to-all inboxes, so most frees are remote. Every
// block carries a cookie over its whole length (seeded by owner thread,
// sequence number and size) checked by the thread that frees it; a live
// registry catches an address handed out twice; counts must balance.
//
// SNMALLOC_TEST_THREADS (default 8) and SNMALLOC_TEST_SECONDS (default 2,
// per test case) tune the run.
#include "support/alloc_checks.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <malloc.h>
#include <mutex>
#include <new>
#include <random>
#include <snmalloc/snmalloc.h>
#include <string>
#include <thread>
#include <unordered_set>
#include <vector>

using namespace snmalloc_test;

namespace
{
  size_t env_or(const char* name, size_t fallback)
  {
    const char* value = std::getenv(name);
    return value == nullptr ? fallback : std::strtoul(value, nullptr, 10);
  }

  const size_t thread_count = env_or("SNMALLOC_TEST_THREADS", 8);
  const std::chrono::seconds run_time{env_or("SNMALLOC_TEST_SECONDS", 2)};

  // How a block was allocated, so the freeing thread uses the matching
  // deallocation (remote frees through every entry point).
  enum class Kind
  {
    Malloc,
    AlignedAlloc,
    CppApiSized,
    OperatorNewSized,
  };

  struct Block
  {
    void* p;
    size_t size;
    size_t align;
    uint64_t seed;
    Kind kind;
  };

  // Shared by all threads of one run: the set of live addresses, counts
  // and the first failure seen (Catch2 assertions are not thread-safe).
  class HeapChecker
  {
    static constexpr size_t shard_count = 64;
    struct Shard
    {
      std::mutex lock;
      std::unordered_set<uintptr_t> live;
    };
    Shard shards[shard_count];
    std::mutex failure_lock;

    Shard& shard_of(const void* p)
    {
      return shards[mix(reinterpret_cast<uintptr_t>(p)) % shard_count];
    }

  public:
    std::atomic<size_t> allocated{0};
    std::atomic<size_t> freed{0};
    std::atomic<size_t> failures{0};
    std::string first_failure;

    void fail(const std::string& what)
    {
      if (failures++ == 0)
      {
        std::lock_guard<std::mutex> guard(failure_lock);
        first_failure = what;
      }
    }

    void register_live(const void* p)
    {
      Shard& shard = shard_of(p);
      std::lock_guard<std::mutex> guard(shard.lock);
      if (!shard.live.insert(reinterpret_cast<uintptr_t>(p)).second)
        fail("address handed out twice while live");
    }

    void unregister_live(const void* p)
    {
      Shard& shard = shard_of(p);
      std::lock_guard<std::mutex> guard(shard.lock);
      if (shard.live.erase(reinterpret_cast<uintptr_t>(p)) != 1)
        fail("freeing an address that is not live");
    }

    size_t live_count()
    {
      size_t total = 0;
      for (auto& shard : shards)
      {
        std::lock_guard<std::mutex> guard(shard.lock);
        total += shard.live.size();
      }
      return total;
    }
  };

  // One thread's source of blocks: random sizes and kinds, each block
  // stamped with a cookie unique to (thread, sequence, size).
  class BlockMaker
  {
    HeapChecker& checker;
    std::mt19937_64 rng;
    uint64_t owner;
    uint64_t sequence = 0;

    size_t random_size()
    {
      uint64_t bucket = rng() % 100;
      if (bucket < 70)
        return 1 + rng() % 256;
      if (bucket < 90)
        return 257 + rng() % 8192;
      if (bucket < 99)
        return 8193 + rng() % 57344;
      return 65537 + rng() % (1 << 20);
    }

  public:
    BlockMaker(HeapChecker& checker, uint64_t owner)
    : checker(checker), rng(owner * 7919 + 1), owner(owner)
    {}

    uint64_t random()
    {
      return rng();
    }

    bool make(Block& block)
    {
      block.size = random_size();
      block.kind = static_cast<Kind>(rng() % 4);
      block.align = size_t(16) << (rng() % 9);
      block.seed = mix((owner << 40) ^ (sequence++ << 1)) ^ block.size;
      switch (block.kind)
      {
        case Kind::Malloc:
          block.p = std::malloc(block.size);
          break;
        case Kind::AlignedAlloc:
          block.p = aligned_alloc(block.align, block.size);
          break;
        case Kind::CppApiSized:
          block.p = snmalloc::alloc(block.size);
          break;
        case Kind::OperatorNewSized:
          block.p = ::operator new(block.size);
          break;
      }
      if (block.p == nullptr)
      {
        checker.fail("allocation of " + std::to_string(block.size) + " failed");
        return false;
      }
      if (block.kind == Kind::AlignedAlloc && !is_aligned(block.p, block.align))
        checker.fail("aligned_alloc result misaligned");
      checker.register_live(block.p);
      checker.allocated++;
      stamp(block.p, block.size, block.seed);
      return true;
    }

    // The freeing thread checks the cookie, sometimes moves the block with
    // realloc first (a remote realloc), then frees it.
    void check_and_free(Block block)
    {
      if (!stamp_intact(block.p, block.size, block.seed))
        checker.fail("cookie overwritten in block of " + std::to_string(block.size));
      if (block.kind == Kind::Malloc && rng() % 8 == 0)
      {
        size_t new_size = 1 + rng() % (2 * block.size + 64);
        checker.unregister_live(block.p);
        void* moved = std::realloc(block.p, new_size);
        if (moved == nullptr)
        {
          checker.fail("realloc failed");
          return;
        }
        checker.register_live(moved);
        size_t kept = new_size < block.size ? new_size : block.size;
        if (!stamp_intact(moved, kept, block.seed))
          checker.fail("realloc lost contents");
        block.p = moved;
        block.size = new_size;
        // Write all of the new size: were the block too small, a
        // neighbour's cookie would show it.
        stamp(block.p, block.size, ~block.seed);
      }
      checker.unregister_live(block.p);
      checker.freed++;
      switch (block.kind)
      {
        case Kind::Malloc:
        case Kind::AlignedAlloc:
          std::free(block.p);
          break;
        case Kind::CppApiSized:
          snmalloc::dealloc(block.p, block.size);
          break;
        case Kind::OperatorNewSized:
          ::operator delete(block.p, block.size);
          break;
      }
    }
  };

  // A bounded queue from producers to one consumer.
  class BlockQueue
  {
    static constexpr size_t capacity = 2048;
    std::mutex lock;
    std::condition_variable changed;
    std::deque<Block> blocks;
    size_t open_producers;

  public:
    explicit BlockQueue(size_t producers) : open_producers(producers) {}

    void push(const Block& block)
    {
      std::unique_lock<std::mutex> guard(lock);
      changed.wait(guard, [&] { return blocks.size() < capacity; });
      blocks.push_back(block);
      changed.notify_all();
    }

    void close()
    {
      std::lock_guard<std::mutex> guard(lock);
      open_producers--;
      changed.notify_all();
    }

    // False once every producer closed and the queue is drained.
    bool pop(Block& block)
    {
      std::unique_lock<std::mutex> guard(lock);
      changed.wait(guard, [&] { return !blocks.empty() || open_producers == 0; });
      if (blocks.empty())
        return false;
      block = blocks.front();
      blocks.pop_front();
      changed.notify_all();
      return true;
    }
  };

  // An unbounded inbox drained in batches by its owner thread.
  struct Inbox
  {
    std::mutex lock;
    std::vector<Block> blocks;

    void post(const Block& block)
    {
      std::lock_guard<std::mutex> guard(lock);
      blocks.push_back(block);
    }

    size_t size()
    {
      std::lock_guard<std::mutex> guard(lock);
      return blocks.size();
    }

    std::vector<Block> take_all()
    {
      std::vector<Block> taken;
      std::lock_guard<std::mutex> guard(lock);
      taken.swap(blocks);
      return taken;
    }
  };

  void require_balanced(HeapChecker& checker)
  {
    INFO("first failure: " << checker.first_failure);
    CHECK(checker.failures == 0);
    CHECK(checker.allocated > 0);
    CHECK(checker.allocated == checker.freed);
    CHECK(checker.live_count() == 0);
  }
}

TEST_CASE("stress-producer-consumer")
{
  // Half the threads produce, half consume; each consumer has its own
  // queue fed by every producer in turn.
  HeapChecker checker;
  const size_t producers = thread_count / 2 > 0 ? thread_count / 2 : 1;
  const size_t consumers = thread_count - producers > 0 ? thread_count - producers : 1;
  std::vector<std::unique_ptr<BlockQueue>> queues;
  for (size_t i = 0; i < consumers; i++)
    queues.push_back(std::make_unique<BlockQueue>(producers));
  const auto deadline = std::chrono::steady_clock::now() + run_time;

  std::vector<std::thread> threads;
  for (size_t i = 0; i < producers; i++)
  {
    threads.emplace_back([&, i] {
      BlockMaker maker(checker, i);
      Block block;
      for (uint64_t n = 0; std::chrono::steady_clock::now() < deadline; n++)
      {
        if (maker.make(block))
          queues[(i + n) % consumers]->push(block);
      }
      for (auto& queue : queues)
        queue->close();
    });
  }
  for (size_t i = 0; i < consumers; i++)
  {
    threads.emplace_back([&, i] {
      BlockMaker maker(checker, producers + i);
      Block block;
      while (queues[i]->pop(block))
      {
        maker.check_and_free(block);
        // Consumers allocate too, so their own allocators are busy while
        // remote frees arrive for the producers'.
        if (maker.random() % 4 == 0 && maker.make(block))
          maker.check_and_free(block);
      }
    });
  }
  for (auto& thread : threads)
    thread.join();
  require_balanced(checker);
}

TEST_CASE("stress-all-to-all")
{
  // Every thread allocates, keeps some blocks in a working set and sends
  // the others to random threads, which check and free them.
  constexpr size_t working_set = 512;
  constexpr size_t inbox_limit = 20000;
  HeapChecker checker;
  std::vector<Inbox> inboxes(thread_count);
  std::atomic<size_t> done_sending{0};
  const auto deadline = std::chrono::steady_clock::now() + run_time;

  std::vector<std::thread> threads;
  for (size_t i = 0; i < thread_count; i++)
  {
    threads.emplace_back([&, i] {
      BlockMaker maker(checker, i);
      std::vector<Block> kept;
      Block block;
      auto drain_inbox = [&] {
        for (const Block& received : inboxes[i].take_all())
          maker.check_and_free(received);
      };
      for (uint64_t n = 0; std::chrono::steady_clock::now() < deadline; n++)
      {
        if (!maker.make(block))
          continue;
        size_t target = maker.random() % thread_count;
        if (maker.random() % 2 == 0 && inboxes[target].size() < inbox_limit)
          inboxes[target].post(block);
        else if (kept.size() < working_set)
          kept.push_back(block);
        else
        {
          size_t slot = maker.random() % working_set;
          maker.check_and_free(kept[slot]);
          kept[slot] = block;
        }
        if (n % 64 == 0)
          drain_inbox();
      }
      done_sending++;
      while (done_sending < thread_count)
      {
        drain_inbox();
        std::this_thread::yield();
      }
      drain_inbox();
      for (const Block& own : kept)
        maker.check_and_free(own);
    });
  }
  for (auto& thread : threads)
    thread.join();
  require_balanced(checker);
}
