// Heap statistics (snmalloc::stats, snmalloc_stats) against what the test
// itself holds: small objects of one class, large runs, and objects
// allocated by threads and freed by others, before and after they exit.
#include "support/alloc_checks.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstdlib>
#include <malloc.h>
#include <snmalloc/snmalloc.h>
#include <snmalloc/snmalloc_stats.h>
#include <thread>
#include <vector>

using namespace snmalloc_test;

namespace
{
  // A class nothing else in the test program allocates from (Catch2's
  // strings and vectors are far smaller).
  constexpr size_t SIZE = 6000;
  const size_t sc = snmalloc::size_to_sizeclass(SIZE);
  const size_t class_size = snmalloc::sizeclass_to_size(sc);
  const size_t capacity = snmalloc::sizeclasses.capacity[sc];

  int64_t live_objects()
  {
    return int64_t(snmalloc::stats().sizeclasses[sc].live_objects);
  }

  std::vector<void*> allocate(size_t n, size_t size)
  {
    std::vector<void*> held;
    for (size_t i = 0; i < n; i++)
    {
      held.push_back(std::malloc(size));
      escape(held.back());
    }
    return held;
  }

  void free_all(std::vector<void*>& held)
  {
    for (void* p : held)
      std::free(p);
    held.clear();
  }
} // namespace

TEST_CASE("stats-small-objects-held-and-freed")
{
  const size_t n = 5000;
  int64_t before = live_objects();
  snmalloc::Stats s0 = snmalloc::stats();
  std::vector<void*> held = allocate(n, SIZE);
  snmalloc::Stats s1 = snmalloc::stats();
  // Every held object counts; at most the last refill's batch more (it
  // waits in this thread's fast list).  (`before` is itself an upper bound,
  // so the growth is bounded above, and the count itself below.)
  CHECK(s1.sizeclasses[sc].live_objects >= n);
  CHECK(int64_t(s1.sizeclasses[sc].live_objects) - before <= int64_t(n + capacity));
  CHECK(s1.sizeclasses[sc].object_size == class_size);
  CHECK(s1.sizeclasses[sc].slabs * capacity >= n);
  CHECK(s1.sizeclasses[sc].slab_bytes >= n * class_size);
  CHECK(s1.small_live_bytes >= n * class_size);
  CHECK(s1.peak_live_bytes >= s1.live_bytes);
  CHECK(s1.slab_bytes >= s1.small_live_bytes);
  CHECK(s1.resident_bytes >= s1.slab_bytes + s1.large_live_bytes + s1.meta_bytes);

  free_all(held);
  snmalloc::Stats s2 = snmalloc::stats();
  // Slabs that are wholly free again were released: what is left is at
  // most one slab, kept against thrashing, and its batch.
  CHECK(int64_t(s2.sizeclasses[sc].live_objects) - before <= int64_t(capacity));
  CHECK(s2.sizeclasses[sc].slabs <= s0.sizeclasses[sc].slabs + 1);
  CHECK(s2.peak_live_bytes >= s1.live_bytes);
}

TEST_CASE("stats-large-runs-exact")
{
  const size_t n = 10;
  const size_t size = (size_t(1) << 20) + 1;
  const size_t run = snmalloc::large_size(size);
  snmalloc::Stats s0 = snmalloc::stats();
  std::vector<void*> held = allocate(n, size);
  snmalloc::Stats s1 = snmalloc::stats();
  CHECK(s1.large_runs - s0.large_runs == n);
  CHECK(s1.large_live_bytes - s0.large_live_bytes == n * run);
  CHECK(s1.peak_live_bytes >= s1.live_bytes);

  // realloc growing one in place or by moving: still n runs, one larger.
  held[0] = std::realloc(held[0], 3 * size);
  snmalloc::Stats s2 = snmalloc::stats();
  CHECK(s2.large_runs - s0.large_runs == n);
  CHECK(
    s2.large_live_bytes - s0.large_live_bytes == (n - 1) * run + snmalloc::large_size(3 * size));

  free_all(held);
  snmalloc::Stats s3 = snmalloc::stats();
  CHECK(s3.large_runs == s0.large_runs);
  CHECK(s3.large_live_bytes == s0.large_live_bytes);
}

TEST_CASE("stats-threads-and-cross-thread-frees")
{
  const size_t threads = 4;
  const size_t per_thread = 2000;
  int64_t before = live_objects();

  // Threads allocate and exit holding their objects; their allocators go
  // back to the pool with the slabs.
  std::vector<std::vector<void*>> held(threads);
  std::vector<std::thread> workers;
  for (size_t t = 0; t < threads; t++)
    workers.emplace_back([&, t] { held[t] = allocate(per_thread, SIZE); });
  for (auto& w : workers)
    w.join();
  workers.clear();
  int64_t grew = live_objects() - before;
  CHECK(live_objects() >= int64_t(threads * per_thread));
  // Each exited thread gave its fast list back; what is left above the
  // held objects is at most a slab per thread that did not reach an event.
  CHECK(grew <= int64_t(threads * (per_thread + capacity)));

  // The main thread frees them all: remote frees to idle allocators.
  for (auto& h : held)
    free_all(h);
  CHECK(live_objects() - before <= int64_t(threads * capacity));

  // The other way: the main thread allocates, threads free.
  std::vector<void*> mine = allocate(threads * per_thread, SIZE);
  CHECK(live_objects() >= int64_t(threads * per_thread));
  for (size_t t = 0; t < threads; t++)
    workers.emplace_back([&, t] {
      for (size_t i = t; i < mine.size(); i += threads)
        std::free(mine[i]);
    });
  for (auto& w : workers)
    w.join();
  mine.clear();
  CHECK(live_objects() - before <= int64_t((threads + 1) * capacity));
}

TEST_CASE("stats-sized-frees-free-what-they-are-given")
{
  // Small objects of one class, each freed with the size it was asked
  // with, by this thread (the fast path) and by others (the remote free,
  // the size checked against the slab); some at an alignment the class
  // already has.
  const size_t n = 3000;
  int64_t before = live_objects();
  std::vector<void*> mine;
  std::vector<size_t> sizes;
  for (size_t i = 0; i < n; i++)
  {
    size_t size = class_size - (i * 37) % (class_size - SIZE + 1);
    size_t align = size_t(16) << (i % 3);
    mine.push_back(i % 2 == 0 ? std::malloc(size) : aligned_alloc(align, size));
    sizes.push_back(size);
    escape(mine.back());
  }
  // One that realloc shrank in place: its object is larger than the size
  // it is freed with, which is no error.
  const size_t shrunk_size = class_size / 2 + 8;
  mine.push_back(std::realloc(std::malloc(class_size), shrunk_size));
  sizes.push_back(shrunk_size);
  for (void* p : mine)
    REQUIRE(malloc_usable_size(p) == class_size);
  CHECK(live_objects() - before >= int64_t(n));
  std::vector<std::thread> freers;
  for (size_t t = 0; t < 3; t++)
    freers.emplace_back([&, t] {
      for (size_t i = t; i < mine.size(); i += 4)
      {
        if (i % 2 == 0)
          free_sized(mine[i], sizes[i]);
        else
          free_aligned_sized(mine[i], size_t(16) << (i % 3), sizes[i]);
      }
    });
  for (size_t i = 3; i < mine.size(); i += 4)
    i % 2 == 0 ? free_sized(mine[i], sizes[i]) :
                 free_aligned_sized(mine[i], size_t(16) << (i % 3), sizes[i]);
  for (auto& f : freers)
    f.join();
  CHECK(live_objects() - before <= int64_t(4 * capacity));

  // operator new's objects, deleted with their size by other threads (the
  // remote free the size's class lets through) and by this one.
  std::vector<void*> objects;
  for (size_t i = 0; i < n; i++)
    objects.push_back(::operator new(sizes[i]));
  CHECK(live_objects() - before >= int64_t(n));
  for (size_t t = 0; t < 3; t++)
    freers[t] = std::thread([&, t] {
      for (size_t i = t; i < n; i += 4)
        ::operator delete(objects[i], sizes[i]);
    });
  for (size_t i = 3; i < n; i += 4)
    ::operator delete(objects[i], sizes[i]);
  for (auto& f : freers)
    f.join();
  CHECK(live_objects() - before <= int64_t(4 * capacity));

  // Large runs, counted exactly: every byte given back, at alignments up
  // to 1 MiB.
  snmalloc::Stats s0 = snmalloc::stats();
  struct Held
  {
    void* p;
    size_t align, size;
  };
  std::vector<Held> large;
  for (size_t align : {size_t(16), size_t(4096), size_t(65536), size_t(1) << 20})
    for (size_t size : {size_t(70000), size_t(300001), size_t(3) << 20})
    {
      large.push_back({aligned_alloc(align, size), align, size});
      REQUIRE(large.back().p != nullptr);
      CHECK(reinterpret_cast<uintptr_t>(large.back().p) % align == 0);
    }
  snmalloc::Stats s1 = snmalloc::stats();
  CHECK(s1.large_runs - s0.large_runs == large.size());
  for (const Held& h : large)
    free_aligned_sized(h.p, h.align, h.size);
  // A null pointer is free(NULL), whatever the size and alignment.
  free_sized(nullptr, 100);
  free_aligned_sized(nullptr, 64, 100);
  free_aligned_sized(nullptr, 24, 100);
  free_aligned_sized(nullptr, 0, 0);
  snmalloc::Stats s2 = snmalloc::stats();
  CHECK(s2.large_runs == s0.large_runs);
  CHECK(s2.large_live_bytes == s0.large_live_bytes);
}

TEST_CASE("stats-c-api")
{
  CHECK(snmalloc_stats(nullptr) == EINVAL);
  struct snmalloc_stats s;
  std::memset(&s, 0xff, sizeof(s));
  REQUIRE(snmalloc_stats(&s) == 0);
  CHECK(s.sizeclass_count == SNMALLOC_STATS_SIZECLASSES);
  CHECK(s.sizeclasses[0].object_size == 16);
  CHECK(s.sizeclasses[SNMALLOC_STATS_SIZECLASSES - 1].object_size == 65536);
  uint64_t small = 0;
  for (const auto& c : s.sizeclasses)
    small += c.live_objects * c.object_size;
  CHECK(small == s.small_live_bytes);
  CHECK(s.live_bytes == s.small_live_bytes + s.large_live_bytes);
  CHECK(s.live_bytes > 0);
  CHECK(s.meta_bytes > 0);
#if SNMALLOC_PROFILE
  if (getenv("SNMALLOC_PROFILE") != nullptr)
    CHECK(s.profiler_bytes > 0);
#else
  CHECK(s.profiler_bytes == 0);
#endif
}
