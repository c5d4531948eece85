// Thread churn: thousands of short-lived threads allocate and free; some of
// their blocks outlive them and are freed by later threads or by the main
// thread after they exited.
#include "support/alloc_checks.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <mutex>
#include <random>
#include <string>
#include <thread>
#include <vector>

using namespace snmalloc_test;

namespace
{
  constexpr size_t total_threads = 5000;
  constexpr size_t concurrent_threads = 8;
  constexpr size_t blocks_per_thread = 64;
  constexpr size_t left_for_main = 4;
  constexpr size_t left_for_successors = 4;

  struct Stamped
  {
    void* p;
    size_t size;
    uint64_t seed;
  };

  struct Leftovers
  {
    std::mutex lock;
    std::vector<Stamped> for_main;
    std::vector<Stamped> for_successors;
  };

  // One short-lived thread's work; returns the number of damaged blocks.
  size_t short_lived_thread(size_t index, Leftovers& leftovers)
  {
    std::mt19937_64 rng(index);
    size_t damaged = 0;
    std::vector<Stamped> mine;
    for (size_t i = 0; i < blocks_per_thread; i++)
    {
      size_t size = i % 16 == 0 ? 65537 + rng() % 100000 : 1 + rng() % 1024;
      Stamped block{std::malloc(size), size, mix(index * 1000 + i)};
      if (block.p == nullptr)
        return blocks_per_thread;
      stamp(block.p, block.size, block.seed);
      mine.push_back(block);
    }
    std::vector<Stamped> inherited;
    {
      std::lock_guard<std::mutex> guard(leftovers.lock);
      for (size_t i = 0; i < left_for_main; i++)
      {
        leftovers.for_main.push_back(mine.back());
        mine.pop_back();
      }
      // Blocks of threads that already exited, freed here (their
      // allocator may by now serve another thread).
      inherited.swap(leftovers.for_successors);
      for (size_t i = 0; i < left_for_successors; i++)
      {
        leftovers.for_successors.push_back(mine.back());
        mine.pop_back();
      }
    }
    for (const Stamped& block : mine)
    {
      damaged += !stamp_intact(block.p, block.size, block.seed);
      std::free(block.p);
    }
    for (const Stamped& block : inherited)
    {
      damaged += !stamp_intact(block.p, block.size, block.seed);
      std::free(block.p);
    }
    return damaged;
  }
}

TEST_CASE("thread-churn")
{
  Leftovers leftovers;
  std::atomic<size_t> damaged{0};
  const size_t resident_before = resident_bytes();

  for (size_t started = 0; started < total_threads;)
  {
    std::vector<std::thread> batch;
    for (size_t i = 0; i < concurrent_threads && started < total_threads;
         i++, started++)
    {
      batch.emplace_back(
        [&, started] { damaged += short_lived_thread(started, leftovers); });
    }
    for (auto& thread : batch)
      thread.join();
  }

  CHECK(damaged == 0);
  CHECK(leftovers.for_main.size() == total_threads * left_for_main);
  size_t damaged_by_main = 0;
  for (auto* list : {&leftovers.for_main, &leftovers.for_successors})
  {
    for (const Stamped& block : *list)
    {
      damaged_by_main += !stamp_intact(block.p, block.size, block.seed);
      std::free(block.p);
    }
  }
  CHECK(damaged_by_main == 0);

  // Exited threads' allocators are pooled and reused, so the footprint
  // does not grow with the number of threads. At most 20000 blocks of up
  // to 1 KiB stay live at once (20 MiB); 5000 threads each stranding even
  // a few 16 KiB slabs would pass 128 MiB.
  const size_t resident_after = resident_bytes();
  INFO("resident before " << resident_before << " after " << resident_after);
  CHECK(resident_after < resident_before + (size_t(128) << 20));
}
