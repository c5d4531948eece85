// Memory goes back to the OS: after a large live set is touched and freed,
// the resident set size (from /proc/self/statm) falls by most of it.
//
// The bound: at least 75% of the growth must be returned. An allocator
// legitimately keeps some of it: cached empty slabs per sizeclass, a cache
// of recently freed chunks it returns with a delay, the committed pagemap
// (about 1 MiB per GiB of heap) and slab metadata. Those are a few tens of
// MiB; a quarter of the live set leaves room for them, while an allocator
// that keeps its freed memory resident retains close to 100% and fails.
// Memory that is returned lazily gets up to 5 seconds, during which the
// test keeps allocating a little so slow paths that return memory run.
//
// The checks are hidden from a plain run: ctest runs each in a process of
// its own (see CMakeLists.txt), so memory one check kept cannot hide the
// growth the next one measures.
#include "support/alloc_checks.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <snmalloc/snmalloc.h>
#include <sys/prctl.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace snmalloc_test;

namespace
{
  constexpr size_t mib = size_t(1) << 20;
  constexpr size_t smallest_object = 16;
  constexpr size_t largest_object = 512;
  constexpr size_t smallest_large_block = 64 * 1024;
  constexpr size_t largest_large_block = mib;
  constexpr double required_fraction_returned = 0.75;
  constexpr auto patience = std::chrono::seconds(5);

  struct LiveSet
  {
    size_t small_bytes;
    size_t large_bytes;
  };

  // The sizes of the blocks making up the live set, large blocks first.
  std::vector<size_t> plan_block_sizes(LiveSet wanted)
  {
    std::mt19937_64 rng(wanted.small_bytes ^ wanted.large_bytes);
    std::vector<size_t> sizes;
    for (size_t bytes = 0; bytes < wanted.large_bytes;)
    {
      sizes.push_back(smallest_large_block +
        rng() % (largest_large_block - smallest_large_block + 1));
      bytes += sizes.back();
    }
    for (size_t bytes = 0; bytes < wanted.small_bytes;)
    {
      sizes.push_back(
        smallest_object + rng() % (largest_object - smallest_object + 1));
      bytes += sizes.back();
    }
    return sizes;
  }

  // Allocates and touches the live set, frees it, and checks the resident
  // set falls by the required fraction of the growth.
  void check_resident_set_falls(LiveSet wanted)
  {
    const std::vector<size_t> sizes = plan_block_sizes(wanted);
    // Made before the baseline, so the bookkeeping is not counted.
    std::vector<void*> blocks(sizes.size(), nullptr);
    const size_t baseline = resident_bytes();

    size_t allocated = 0;
    for (size_t i = 0; i < sizes.size(); i++)
    {
      blocks[i] = std::malloc(sizes[i]);
      REQUIRE(blocks[i] != nullptr);
      std::memset(blocks[i], 0x77, sizes[i]);
      allocated += sizes[i];
    }

    const size_t peak = resident_bytes();
    INFO("baseline " << baseline / mib << " MiB, peak " << peak / mib << " MiB");
    // The measurement itself: touching the live set must have shown up.
    REQUIRE(peak >= baseline + allocated * 9 / 10);

    for (void* p : blocks)
      std::free(p);

    const double growth = static_cast<double>(peak - baseline);
    auto returned = [&] {
      size_t now = resident_bytes();
      return now < peak ? static_cast<double>(peak - now) : 0.0;
    };
    const auto give_up = std::chrono::steady_clock::now() + patience;
    while (returned() < required_fraction_returned * growth &&
           std::chrono::steady_clock::now() < give_up)
    {
      for (size_t size = 16; size <= mib; size *= 4)
      {
        void* p = std::malloc(size);
        escape(p);
        std::free(p);
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    const double returned_bytes = returned();
    INFO("returned " << returned_bytes / mib << " of " << growth / mib << " MiB");
    CHECK(returned_bytes >= required_fraction_returned * growth);
  }
}

namespace
{
  // Pages [p, p + size) lies on.
  size_t pages_covered(const void* p, size_t size, size_t page)
  {
    uintptr_t a = reinterpret_cast<uintptr_t>(p);
    return (a + size - 1) / page - a / page + 1;
  }
}

// A short-lived program (a compiler driver, a shell tool) takes a few
// objects of many sizes.  Each size should cost about the pages its objects
// lie on, not a whole run of memory made ready for objects that never
// come: in a thread of its own (a fresh thread cache), one written object
// of each of a dozen sizes may grow the resident set by the pages they
// cover and a few for bookkeeping.
TEST_CASE("rss-few-objects-of-many-sizes", "[.]")
{
  const size_t sizes[] = {72, 200, 330, 600, 700, 900, 1100, 1400, 1700, 2200, 2700, 3300};
  constexpr size_t bookkeeping_pages = 8;
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  size_t baseline = 0, after = 0, covered = 0;
  void* first = nullptr;
  std::vector<void*> blocks;
  blocks.reserve(std::size(sizes));
  // Pages are counted as the system's: where transparent huge pages are
  // "always", a first touch could bring in 2 MiB.  (Best effort: where the
  // call is refused, the kernel's setting decides.)
  (void)::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
  // Catch2's assertions stay on the test's thread: the other only records.
  std::thread([&] {
    // The thread's allocator and the measurement's own buffers come first.
    first = std::malloc(16);
    escape(first);
    resident_bytes();
    baseline = resident_bytes();
    for (size_t size : sizes)
    {
      void* p = std::malloc(size);
      if (p == nullptr)
        break;
      std::memset(p, 0x5a, size);
      covered += pages_covered(p, size, page);
      blocks.push_back(p);
    }
    after = resident_bytes();
  }).join();
  REQUIRE(first != nullptr);
  REQUIRE(blocks.size() == std::size(sizes));
  const size_t grown = after > baseline ? (after - baseline) / page : 0;
  INFO("grew by " << grown << " pages; the objects cover " << covered);
  CHECK(baseline != 0);
  CHECK(grown <= covered + bookkeeping_pages);
  for (void* p : blocks)
    std::free(p);
  std::free(first);
}

TEST_CASE("rss-falls-after-large-blocks-freed", "[.]")
{
  check_resident_set_falls({0, 512 * mib});
}

TEST_CASE("rss-falls-after-small-objects-freed", "[.]")
{
  check_resident_set_falls({512 * mib, 0});
}

TEST_CASE("rss-falls-after-mixed-gib-freed", "[.]")
{
  check_resident_set_falls({512 * mib, 512 * mib});
}

namespace
{
  struct BufferThenPieces
  {
    size_t buffer;
    size_t pieces;
    size_t piece;
  };

  // A large buffer written and freed, then pieces that together need a
  // little more than it held, each written as it comes: the resident set
  // may grow by the larger of the buffer and the pieces, not by both the
  // pieces and what of the freed buffer they left.  A block allocated
  // after the buffer, above it, keeps the freed buffer from running into
  // the free memory beyond.
  void check_freed_buffer_not_kept_beside_fresh_memory(BufferThenPieces shape)
  {
    std::vector<void*> pins;
    pins.reserve(64);
    std::vector<void*> pieces(shape.pieces, nullptr);
    snmalloc::trim(); // what an earlier shape freed is not resident
    const size_t baseline = resident_bytes();
    void* buffer = std::malloc(shape.buffer);
    REQUIRE(buffer != nullptr);
    auto above_buffer = [buffer](void* p) {
      return reinterpret_cast<uintptr_t>(p) > reinterpret_cast<uintptr_t>(buffer);
    };
    do
      pins.push_back(std::malloc(150000));
    while (!above_buffer(pins.back()) && pins.size() < 64);
    REQUIRE(above_buffer(pins.back()));
    std::memset(buffer, 0x5a, shape.buffer);
    std::free(buffer);

    size_t peak = resident_bytes();
    for (void*& p : pieces)
    {
      p = std::malloc(shape.piece);
      REQUIRE(p != nullptr);
      std::memset(p, 0xa5, shape.piece);
      peak = std::max(peak, resident_bytes());
    }
    const size_t allowed = std::max(shape.buffer, shape.pieces * shape.piece) + 8 * mib;
    INFO("buffer " << shape.buffer << ", " << shape.pieces << " pieces of " << shape.piece
                   << ": grew " << (peak - baseline) / mib << " MiB, at most "
                   << allowed / mib << " allowed");
    CHECK(peak - baseline <= allowed);
    for (void* p : pieces)
      std::free(p);
    for (void* p : pins)
      std::free(p);
  }
}

// GNU sort's buffer (200 MiB, freed) and merge buffers (four of 50 MiB and
// 32 bytes), and other shapes of it.
TEST_CASE("rss-freed-buffer-not-kept-beside-fresh-memory", "[.]")
{
  check_freed_buffer_not_kept_beside_fresh_memory({(size_t(200) << 20) - 32, 4, (size_t(50) << 20) + 32});
  check_freed_buffer_not_kept_beside_fresh_memory({size_t(96) << 20, 3, (size_t(32) << 20) + 4096});
  check_freed_buffer_not_kept_beside_fresh_memory({size_t(64) << 20, 2, size_t(40) << 20});
  check_freed_buffer_not_kept_beside_fresh_memory({size_t(48) << 20, 5, (size_t(10) << 20) + 100});
}

// Memory freed within a decay period is used again before memory whose
// pages a decay returned, which would fault them back: the backend's
// blocks, freed in two sets a period apart, then a decay (that returns the
// first set's pages and ages the second's), then as many requests as a set
// has blocks, as slabs take them.  Each freed block lies between two kept
// ones, so none merges with another.
TEST_CASE("rss-resident-free-blocks-taken-first", "[.]")
{
  constexpr size_t block = 64 * 1024;
  constexpr size_t count = 48;
  auto take = [] { return snmalloc::backend.alloc_chunks(block, block).base; };
  std::vector<void*> returned, resident, kept, got;
  // No growth of these takes a block from malloc's slabs between the takes.
  returned.reserve(count);
  resident.reserve(count);
  kept.reserve(2 * count);
  got.reserve(count);
  for (size_t i = 0; i < count; i++)
  {
    returned.push_back(take());
    kept.push_back(take());
    resident.push_back(take());
    kept.push_back(take());
  }
  for (void* p : returned)
    std::memset(p, 1, block);
  for (void* p : resident)
    std::memset(p, 1, block);
  // A backend call once a period has passed is when a decay runs.
  void* tick[2] = {take(), take()};
  auto decay_after_a_period = [&](int i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(650));
    snmalloc::backend.dealloc_chunks(tick[i], block);
  };
  for (void* p : returned)
    snmalloc::backend.dealloc_chunks(p, block);
  decay_after_a_period(0); // `returned` aged
  for (void* p : resident)
    snmalloc::backend.dealloc_chunks(p, block);
  decay_after_a_period(1); // `returned` given back, `resident` aged
  size_t from_resident = 0;
  for (size_t i = 0; i < count; i++)
  {
    got.push_back(take());
    from_resident += std::count(resident.begin(), resident.end(), got.back());
  }
  INFO(from_resident << " of " << count << " requests took a block still resident");
  CHECK(from_resident >= count - 2);
  for (void* p : got)
    snmalloc::backend.dealloc_chunks(p, block);
  for (void* p : kept)
    snmalloc::backend.dealloc_chunks(p, block);
}

namespace
{
  // A heap filled with objects, some of them freed here and there, then as
  // many allocated again: the new objects should take the freed places,
  // not new memory.  Every allocator a program might use instead keeps its
  // resident set level here; the bound leaves a quarter of the freed bytes
  // and a few MiB for slabs part-filled when the second round begins.
  struct SparseReuse
  {
    std::vector<size_t> sizes; // of the objects, in allocation order
    std::vector<size_t> freed; // indices into sizes, freed and allocated again
    size_t churn_operations = 0; // random replacements after the first fill
  };

  constexpr double reuse_slack_of_freed = 0.25;
  constexpr size_t reuse_slack_bytes = 4 * mib;

  // Each object holds a pattern of its own over its whole length, so that
  // two objects handed out over each other show: its index, in the high
  // half of the seed, keeps objects' patterns apart (a seed steps by the
  // offset).
  uint64_t seed_of(size_t index)
  {
    return uint64_t(index) << 32;
  }

  void check_sparse_frees_reused(const SparseReuse& plan)
  {
    (void)::prctl(PR_SET_THP_DISABLE, 1, 0, 0, 0);
    std::vector<void*> objects(plan.sizes.size());
    size_t failed = 0; // allocations that returned nullptr
    auto allocate = [&](size_t i) {
      objects[i] = std::malloc(plan.sizes[i]);
      if (objects[i] == nullptr)
        failed++;
      else
        stamp(objects[i], plan.sizes[i], seed_of(i));
    };
    for (size_t i = 0; i < objects.size(); i++)
      allocate(i);
    std::mt19937_64 rng(objects.size());
    const size_t filled = resident_bytes();
    for (size_t n = 0; n < plan.churn_operations; n++)
    {
      size_t i = rng() % objects.size();
      std::free(objects[i]);
      allocate(i);
    }
    const size_t before = resident_bytes();
    size_t freed_bytes = 0;
    for (size_t i : plan.freed)
    {
      std::free(objects[i]);
      freed_bytes += plan.sizes[i];
    }
    for (size_t i : plan.freed)
      allocate(i);
    const size_t after = resident_bytes();
    size_t damaged = 0;
    for (size_t i = 0; i < objects.size(); i++)
      damaged += objects[i] == nullptr || stamp_intact(objects[i], plan.sizes[i], seed_of(i)) ? 0 : 1;
    for (void* p : objects)
      std::free(p);
    CHECK(failed == 0);
    CHECK(damaged == 0);
    // The replacements free and allocate as many bytes as the round below.
    const size_t bound = size_t(reuse_slack_of_freed * double(freed_bytes)) + reuse_slack_bytes;
    INFO("filled " << filled / mib << " MiB, " << before / mib << " MiB after "
                   << plan.churn_operations << " replacements; freed "
                   << freed_bytes / mib << " MiB and allocated as much again: "
                   << after / mib << " MiB");
    CHECK(before <= filled + bound);
    CHECK(after <= before + bound);
  }

  // `total` bytes of objects of sizes from `pick`.
  template<typename Pick>
  std::vector<size_t> sizes_totalling(size_t total, Pick&& pick)
  {
    std::vector<size_t> sizes;
    for (size_t bytes = 0; bytes < total; bytes += sizes.back())
      sizes.push_back(pick());
    return sizes;
  }

  std::vector<size_t> every_nth(size_t count, size_t n, size_t first)
  {
    std::vector<size_t> picked;
    for (size_t i = first; i < count; i += n)
      picked.push_back(i);
    return picked;
  }
}

// One size, every fifth object freed in the order they were allocated.
TEST_CASE("rss-sparse-frees-reused-one-size", "[.]")
{
  SparseReuse plan;
  plan.sizes = sizes_totalling(128 * mib, [] { return size_t(48); });
  plan.freed = every_nth(plan.sizes.size(), 5, 2);
  check_sparse_frees_reused(plan);
}

// Sizes spread over 16 bytes to 2 KiB (as many objects of each power of
// two), a random sixth freed, allocated again in another order.
TEST_CASE("rss-sparse-frees-reused-mixed-sizes", "[.]")
{
  std::mt19937_64 rng(7);
  SparseReuse plan;
  plan.sizes = sizes_totalling(128 * mib, [&] {
    size_t low = size_t(16) << (rng() % 7);
    return low + rng() % low;
  });
  for (size_t i = 0; i < plan.sizes.size(); i++)
    if (rng() % 6 == 0)
      plan.freed.push_back(i);
  std::shuffle(plan.freed.begin(), plan.freed.end(), rng);
  check_sparse_frees_reused(plan);
}

// A heap in use for a while (its objects replaced at random, as many
// times as there are objects) before every eighth of objects of 600 bytes
// is freed, last first.
TEST_CASE("rss-sparse-frees-reused-after-churn", "[.]")
{
  SparseReuse plan;
  plan.sizes = sizes_totalling(128 * mib, [] { return size_t(600); });
  plan.churn_operations = plan.sizes.size();
  plan.freed = every_nth(plan.sizes.size(), 8, 3);
  std::reverse(plan.freed.begin(), plan.freed.end());
  check_sparse_frees_reused(plan);
}
